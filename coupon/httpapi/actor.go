package httpapi

import (
	"net/http"
	"strings"

	"github.com/couponlink/couponlink/quota"
)

// Who acts and through what: the one place the write routes take the
// identity they record (a policy change's changed_by, a finding's
// operator) and the way it came (quota_policy_audit.source).

// ClientHeader names the program that sends a request: the console sends
// "console", so that the audit says a change came from the console and
// not from a script (which sends nothing, or its own name).
const ClientHeader = "X-Couponlink-Client"

// actor is who a write records as acting: the name the request gives
// (operator, changed_by), trimmed.
func actor(r *http.Request, named string) string { return strings.TrimSpace(named) }

// via is the way a change came, as the audit records it: console when
// the console sent it, else api.
func via(r *http.Request) string {
	if strings.EqualFold(strings.TrimSpace(r.Header.Get(ClientHeader)), "console") {
		return quota.SourceConsole
	}
	return quota.SourceAPI
}
