package route

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/coupon/httpapi"
)

// voids serves POST /v1/voids over the primaries. The whole batch goes
// first to its home primary, picked by the request_id alone: the home
// records the batch under the caller's request_id and checks it as a
// single server does (the 400s, and 409 idempotency_conflict when the
// request_id was used for another batch: then nothing is sent anywhere
// else). The home voids its own coupons; a coupon of another primary
// cannot exist on it (the rule), so it is not_found there and nothing is
// written for it. Then each other primary gets its part of the list, with
// the caller's request_id, reason and operator: a replay of the batch is a
// replay on every primary. The answer lists every coupon's result, from
// its owner, in the caller's order.
func (rt *Router) voids(w http.ResponseWriter, r *http.Request) {
	body, ok := rt.read(w, r)
	if !ok {
		return
	}
	var b struct {
		IDs       []int64 `json:"user_coupon_ids"`
		RequestID string  `json:"request_id"`
	}
	if err := json.Unmarshal(body, &b); err != nil || len(rt.cfg.Primaries) == 1 {
		rt.forward(w, r, 0, body)
		return
	}
	home := rt.home(b.RequestID)
	first := rt.call(r, home, body, r.ContentLength)
	if first.status != http.StatusOK {
		first.relay(w)
		return
	}
	parts := map[int][]int64{}
	for _, id := range b.IDs {
		if k := rt.owner(id); k != home {
			parts[k] = append(parts[k], id)
		}
	}
	if len(parts) == 0 {
		first.relay(w)
		return
	}
	others := make([]int, 0, len(parts))
	bodies := map[int][]byte{}
	for k, ids := range parts {
		part, err := withIDs(body, ids)
		if err != nil {
			rt.internal(w, r, err)
			return
		}
		others, bodies[k] = append(others, k), part
	}
	slices.Sort(others)
	answers := fanOut(others, func(k int) *answer { return rt.call(r, k, bodies[k], int64(len(bodies[k]))) })
	if failed(w, answers) {
		return
	}
	merged, err := mergeVoids(b.IDs, home, first, answers, rt.owner)
	if err != nil {
		rt.internal(w, r, err)
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, merged)
}

// home is the primary that records a void batch: a function of the
// request_id (trimmed, as the server reads it) alone, so that every batch
// sent under one request_id meets the same record.
func (rt *Router) home(requestID string) int {
	h := fnv.New32a()
	h.Write([]byte(strings.TrimSpace(requestID)))
	return int(h.Sum32() % uint32(len(rt.cfg.Primaries)))
}

// withIDs is a void body (that the home accepted) with another list of
// coupons; its other fields keep their bytes.
func withIDs(body []byte, ids []int64) ([]byte, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return nil, fmt.Errorf("split a void batch: %w", err)
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return nil, err
	}
	fields["user_coupon_ids"] = list
	return json.Marshal(fields)
}

// mergeVoids takes each coupon's result from its owner: the home's answer
// for its own coupons, the others' for theirs.
func mergeVoids(ids []int64, home int, first *answer, others []*answer, owner func(int64) int) (httpapi.VoidResponse, error) {
	var out httpapi.VoidResponse
	if err := first.decode(&out); err != nil {
		return out, err
	}
	byID := map[int64]coupon.VoidResult{}
	for _, res := range out.Results {
		if owner(res.UserCouponID) == home {
			byID[res.UserCouponID] = res
		}
	}
	for _, a := range others {
		var part httpapi.VoidResponse
		if err := a.decode(&part); err != nil {
			return out, err
		}
		for _, res := range part.Results {
			byID[res.UserCouponID] = res
		}
	}
	out.Results, out.Counts = make([]coupon.VoidResult, 0, len(ids)), map[string]int{}
	for _, id := range ids {
		res, ok := byID[id]
		if !ok {
			return out, fmt.Errorf("no primary answered for coupon %d of the void batch", id)
		}
		out.Results = append(out.Results, res)
		out.Counts[res.Result]++
	}
	return out, nil
}

// expire serves POST /v1/expire on every primary and sums the answers.
// Without a limit (or 0) every primary sweeps all that is due, at once.
// With a limit, the primaries sweep one after the other in the list's
// order, each with what the ones before left of it; when it runs out
// before the last primary, "more" is true (the primaries not reached may
// have coupons due). The first primary gets the body as it came and
// answers the 400s and 415s a single server gives.
func (rt *Router) expire(w http.ResponseWriter, r *http.Request) {
	body, ok := rt.read(w, r)
	if !ok {
		return
	}
	var b api.ExpireRequest
	if len(body) > 0 && (json.Unmarshal(body, &b) != nil || b.Limit < 0) {
		rt.forward(w, r, 0, body)
		return
	}
	start := time.Now()
	var answers []*answer
	more := false
	if b.Limit == 0 {
		answers = fanOut(rt.all(), func(k int) *answer { return rt.call(r, k, body, r.ContentLength) })
	} else {
		answers, more = rt.expireInTurn(r, body, b.Limit)
	}
	if failed(w, answers) {
		return
	}
	var sum httpapi.ExpireResponse
	for _, a := range answers {
		var one httpapi.ExpireResponse
		if err := a.decode(&one); err != nil {
			rt.internal(w, r, err)
			return
		}
		sum.Expired += one.Expired
		sum.Transactions += one.Transactions
		sum.More = sum.More || one.More
	}
	sum.More = sum.More || more
	sum.DurationSeconds = time.Since(start).Seconds()
	httpapi.WriteJSON(w, http.StatusOK, sum)
}

// expireInTurn sweeps the primaries one after the other with what is left
// of limit; more is true when it ran out before the last primary. It stops
// at the first answer that is not a sweep.
func (rt *Router) expireInTurn(r *http.Request, body []byte, limit int) (answers []*answer, more bool) {
	left := limit
	for k := range rt.cfg.Primaries {
		if left <= 0 {
			return answers, true
		}
		part, length := body, r.ContentLength
		if k > 0 {
			part = fmt.Appendf(nil, `{"limit":%d}`, left)
			length = int64(len(part))
		}
		a := rt.call(r, k, part, length)
		answers = append(answers, a)
		var one httpapi.ExpireResponse
		if a.status != http.StatusOK || a.decode(&one) != nil {
			return answers, false
		}
		left -= one.Expired
	}
	return answers, false
}

// all is the index of every primary.
func (rt *Router) all() []int {
	out := make([]int, len(rt.cfg.Primaries))
	for k := range out {
		out[k] = k
	}
	return out
}

// healthz asks every primary's /healthz at once: ok when all answer, else
// 503 naming the primaries that do not (why is in the log, as on a single
// server).
func (rt *Router) healthz(w http.ResponseWriter, r *http.Request) {
	answers := fanOut(rt.all(), func(k int) *answer { return rt.call(r, k, nil, 0) })
	status := map[string]string{}
	var down []string
	for k, a := range answers {
		name := rt.cfg.Primaries[k].Name
		status[name] = "ok"
		if a.status != http.StatusOK {
			status[name] = "unavailable"
			down = append(down, name)
		}
	}
	if len(down) > 0 {
		httpapi.WriteError(w, &coupon.Error{Code: api.CodeUnavailable, Message: fmt.Sprintf(
			"MySQL of primary %s does not answer; the reason is in the server log", strings.Join(down, ", "))})
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"status": "ok", "time": time.Now().UTC(), "primaries": status})
}
