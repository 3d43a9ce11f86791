package httpapi_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A key given twice, or spelled in another case than the field's name
// (encoding/json takes both, the last one winning), is refused with the
// field's name, at every level, and nothing is written: a gateway that
// reads user_id must see what the API stores.
func TestDuplicateAndCaseVariantKeys(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	id := e.claim(t, tpl, "u0", "app").UserCouponID
	policy := fmt.Sprintf("/v1/templates/%d/quota-policy", tpl)
	claim := func(keys string) rawBody {
		return rawBody(fmt.Sprintf(`{"template_id":%d,"channel":"app","request_id":"r-dup",%s}`, tpl, keys))
	}
	cases := []badCase{
		{"user_id twice", "POST", "/v1/claims", claim(`"user_id":"a","user_id":"b"`), 400, "invalid_argument", "user_id"},
		{"user_id and USER_ID", "POST", "/v1/claims", claim(`"user_id":"a","USER_ID":"b"`), 400, "invalid_argument", "user_id"},
		{"USER_ID and user_id", "POST", "/v1/claims", claim(`"USER_ID":"b","user_id":"a"`), 400, "invalid_argument", "user_id"},
		{"User_Id alone", "POST", "/v1/claims", claim(`"User_Id":"b"`), 400, "invalid_argument", "user_id"},
		{"user_id with a long s (Unicode case folding)", "POST", "/v1/claims", claim(`"uſer_id":"b"`), 400, "invalid_argument", "user_id"},
		{"template_id twice, same value", "POST", "/v1/claims", rawBody(fmt.Sprintf(`{"template_id":%d,"template_id":%d,"user_id":"a","channel":"app","request_id":"r"}`, tpl, tpl)), 400, "invalid_argument", "template_id"},
		{"Channel", "POST", "/v1/claims", rawBody(fmt.Sprintf(`{"template_id":%d,"user_id":"a","Channel":"app","request_id":"r"}`, tpl)), 400, "invalid_argument", "channel"},
		{"order_id twice", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o1","order_id":"o2"}`, id)), 400, "invalid_argument", "order_id"},
		{"Order_ID", "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"Order_ID":"o2"}`, id)), 400, "invalid_argument", "order_id"},
		{"mode twice", "POST", "/v1/refunds", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o1","mode":"restore","mode":"recycle"}`, id)), 400, "invalid_argument", "mode"},
		{"user_coupon_ids twice", "POST", "/v1/voids", rawBody(fmt.Sprintf(`{"user_coupon_ids":[%d],"user_coupon_ids":[],"reason":"r","operator":"op","request_id":"v"}`, id)), 400, "invalid_argument", "user_coupon_ids"},
		{"Reason", "POST", "/v1/voids", rawBody(fmt.Sprintf(`{"user_coupon_ids":[%d],"reason":"r","Reason":"s","operator":"op","request_id":"v"}`, id)), 400, "invalid_argument", "reason"},
		{"LIMIT", "POST", "/v1/expire", rawBody(`{"LIMIT":5}`), 400, "invalid_argument", "limit"},
		{"limit twice", "POST", "/v1/expire", rawBody(`{"limit":5,"limit":6}`), 400, "invalid_argument", "limit"},
		{"mode and MODE", "PUT", policy, rawBody(`{"mode":"signal","MODE":"auto","changed_by":"ann","reason":"r"}`), 400, "invalid_argument", "mode"},
		{"changed_by twice", "PUT", policy, rawBody(`{"mode":"auto","changed_by":"ann","changed_by":"bob","reason":"r"}`), 400, "invalid_argument", "changed_by"},
		{"name and NAME", "POST", "/v1/templates", rawBody(`{"name":"a","NAME":"b","total_quota":1,"channels":{"app":1},"valid_seconds":60}`), 400, "invalid_argument", "name"},
		{"channels twice", "POST", "/v1/templates", rawBody(`{"name":"a","total_quota":1,"channels":{"app":1},"channels":{"sms":1},"valid_seconds":60}`), 400, "invalid_argument", "channels"},
		// nested: a channel named twice in the channels object
		{"a channel twice", "POST", "/v1/templates", rawBody(`{"name":"a","total_quota":100,"channels":{"app":60,"sms":40,"app":60},"valid_seconds":60}`), 400, "invalid_argument", "channels"},
		{"a channel twice, other values", "POST", "/v1/templates", rawBody(`{"name":"a","total_quota":100,"channels":{"app":10,"sms":40,"app":60},"valid_seconds":60}`), 400, "invalid_argument", "channels"},
		// the same spellings with an escape are the same key
		{"user_id and user\\u005fid", "POST", "/v1/claims", claim(`"user_id":"a","user\u005fid":"b"`), 400, "invalid_argument", "user_id"},
		{"app and \\u0061pp", "POST", "/v1/templates", rawBody(`{"name":"a","total_quota":100,"channels":{"app":60,"\u0061pp":40},"valid_seconds":60}`), 400, "invalid_argument", "channels"},
	}
	e.refuseAll(t, cases)

	// channel names are data: "App" and "app" are two channels (the
	// database compares them byte for byte)
	var tmpl struct {
		ID       int64
		Channels map[string]int64
	}
	e.expect(t, 201, "POST", "/v1/templates", rawBody(`{"name":"cased","total_quota":100,"channels":{"App":60,"app":40},"valid_seconds":60}`), &tmpl)
	assert.Equal(t, map[string]int64{"App": 60, "app": 40}, tmpl.Channels)
	assert.Equal(t, []string{"App 60", "app 40"},
		e.strings(t, `SELECT CONCAT(channel, ' ', quota) FROM channel_quota WHERE template_id = ? ORDER BY channel`, tmpl.ID))
	e.claim(t, tmpl.ID, "u1", "App")
	e.claim(t, tmpl.ID, "u2", "app")
	inv := e.inventory(t, tmpl.ID)
	assert.Equal(t, int64(1), inv.Channels["App"].Held)
	assert.Equal(t, int64(1), inv.Channels["app"].Held)
}

// Ids refuse NUL, every other C0 and C1 control character and invalid
// UTF-8 (which encoding/json turns into U+FFFD, as a lone surrogate
// escape); a free-text reason keeps tab, newline and carriage return but
// refuses the rest. The error names the field, and nothing is written.
func TestControlCharactersInIDs(t *testing.T) {
	e := newEnv(t)
	tpl := e.template(t, nil)
	id := e.claim(t, tpl, "u0", "app").UserCouponID
	e.redeem(t, id, "o1")
	policy := fmt.Sprintf("/v1/templates/%d/quota-policy", tpl)

	claim := func(user, channel, request string) map[string]any {
		return map[string]any{"template_id": tpl, "user_id": user, "channel": channel, "request_id": request}
	}
	void := func(reason, operator, request string) map[string]any {
		return map[string]any{"user_coupon_ids": []int64{id}, "reason": reason, "operator": operator, "request_id": request}
	}
	tmpl := func(name string, channels map[string]int) map[string]any {
		return map[string]any{"name": name, "total_quota": 10, "channels": channels, "valid_seconds": 60}
	}
	pol := func(by, reason string) map[string]any {
		return map[string]any{"mode": "auto", "changed_by": by, "reason": reason}
	}
	var cases []badCase
	for _, bad := range []string{"\x00", "\x01", "\x1b", "\x1f", "\x7f", "\u0080", "\u0085", "\u009f", "\n", "\t", "\r"} {
		q := fmt.Sprintf("%q", bad)
		cases = append(cases,
			badCase{"user_id " + q, "POST", "/v1/claims", claim("u"+bad+"1", "app", "r1"), 400, "invalid_argument", "user_id"},
			badCase{"request_id " + q, "POST", "/v1/claims", claim("u1", "app", "r"+bad+"1"), 400, "invalid_argument", "request_id"},
			badCase{"order_id " + q, "POST", "/v1/redemptions", map[string]any{"user_coupon_id": id, "order_id": "o" + bad + "2"}, 400, "invalid_argument", "order_id"},
			badCase{"refund order_id " + q, "POST", "/v1/refunds", map[string]any{"user_coupon_id": id, "order_id": "o1" + bad + "x", "mode": "restore"}, 400, "invalid_argument", "order_id"},
			badCase{"operator " + q, "POST", "/v1/voids", void("fraud", "op"+bad+"1", "v1"), 400, "invalid_argument", "operator"},
			badCase{"void request_id " + q, "POST", "/v1/voids", void("fraud", "op", "v"+bad+"1"), 400, "invalid_argument", "request_id"},
			badCase{"template name " + q, "POST", "/v1/templates", tmpl("spring"+bad+"sale", map[string]int{"app": 10}), 400, "invalid_argument", "name"},
			badCase{"channel name " + q, "POST", "/v1/templates", tmpl("x", map[string]int{"a" + bad + "b": 10}), 400, "invalid_argument", "channels"},
			badCase{"changed_by " + q, "PUT", policy, pol("ann"+bad+"x", "r"), 400, "invalid_argument", "changed_by"},
			badCase{"reset changed_by " + q, "DELETE", policy + "?" + url.Values{"changed_by": {"ann" + bad + "x"}, "reason": {"r"}}.Encode(), nil, 400, "invalid_argument", "changed_by"},
		)
		if bad != "\n" && bad != "\t" && bad != "\r" {
			cases = append(cases,
				badCase{"void reason " + q, "POST", "/v1/voids", void("fraud"+bad+"ring", "op", "v1"), 400, "invalid_argument", "reason"},
				badCase{"policy reason " + q, "PUT", policy, pol("ann", "ticket"+bad+"7"), 400, "invalid_argument", "reason"},
			)
		}
	}
	for _, bad := range []string{"\xff", "\xc3\x28", "\xed\xa0\x80"} { // not UTF-8; a surrogate's bytes
		q := fmt.Sprintf("%q", bad)
		cases = append(cases,
			badCase{"user_id " + q, "POST", "/v1/claims", rawBody(fmt.Sprintf(`{"template_id":%d,"user_id":"u%s","channel":"app","request_id":"r1"}`, tpl, bad)), 400, "invalid_argument", "user_id"},
			badCase{"order_id " + q, "POST", "/v1/redemptions", rawBody(fmt.Sprintf(`{"user_coupon_id":%d,"order_id":"o%s"}`, id, bad)), 400, "invalid_argument", "order_id"},
			badCase{"void reason " + q, "POST", "/v1/voids", rawBody(fmt.Sprintf(`{"user_coupon_ids":[%d],"reason":"r%s","operator":"op","request_id":"v1"}`, id, bad)), 400, "invalid_argument", "reason"},
		)
	}
	cases = append(cases,
		badCase{"user_id with a lone surrogate escape", "POST", "/v1/claims", rawBody(fmt.Sprintf(`{"template_id":%d,"user_id":"u\ud800","channel":"app","request_id":"r1"}`, tpl)), 400, "invalid_argument", "user_id"},
		badCase{"user_id with an escaped NUL", "POST", "/v1/claims", rawBody(fmt.Sprintf(`{"template_id":%d,"user_id":"u\u0000","channel":"app","request_id":"r1"}`, tpl)), 400, "invalid_argument", "user_id"},
		badCase{"channel with NUL on a claim", "POST", "/v1/claims", claim("u1", "app\x00", "r1"), 400, "invalid_argument", "channel"},
	)
	e.refuseAll(t, cases)

	// a reason is free text: tabs and newlines are kept, and so are
	// letters of any script in ids
	v := e.claim(t, tpl, "u-void", "app").UserCouponID
	var vr voidReply
	e.expect(t, 200, "POST", "/v1/voids", map[string]any{"user_coupon_ids": []int64{v}, "reason": "fraud ring\n\tsee TICKET-7\r\n",
		"operator": "öps-ann", "request_id": "v-ünicode"}, &vr)
	require.Equal(t, "voided", vr.Results[0].Result)
	assert.Equal(t, []string{"fraud ring\n\tsee TICKET-7 öps-ann"},
		e.strings(t, `SELECT CONCAT(reason, ' ', operator) FROM inventory_flow WHERE user_coupon_id = ? AND kind = 'void'`, v))
	e.expect(t, 200, "PUT", policy, pol("ann", "line one\nline two"), nil)
	c := e.claim(t, tpl, "用户-1", "app")
	require.Equal(t, "用户-1", c.UserID)
}
