package httpapi

import (
	"net/http"
	"strings"

	"github.com/couponlink/couponlink/quota"
)

// Through what a change came (quota_policy_audit.source); who acts is
// actor's, in auth.go (the token's name).

// ClientHeader names the program that sends a request: the console sends
// "console", so that the audit says a change came from the console and
// not from a script (which sends nothing, or its own name).
const ClientHeader = "X-Couponlink-Client"

// via is the way a change came, as the audit records it: console when
// the console sent it, else api.
func via(r *http.Request) string {
	if strings.EqualFold(strings.TrimSpace(r.Header.Get(ClientHeader)), "console") {
		return quota.SourceConsole
	}
	return quota.SourceAPI
}
