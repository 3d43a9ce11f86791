package httpapi

import (
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
)

// The Host check guards an API without tokens against DNS rebinding: a
// page of evil.example whose name the attacker then points at 127.0.0.1
// is, to the browser, its own origin, so the origin check lets its
// writes through and it may read the answers. Its requests still carry
// its own name in Host, so an API without tokens answers under /v1 only
// the Hosts it knows: loopback names and addresses, and those of
// Config.AllowedHosts. With tokens the check does not apply: a token is
// what a rebinding page lacks.

// ParseAllowedHosts reads a comma-separated list of host names or
// addresses, without a port ("api.internal", "10.0.0.5", "::1"), for
// Config.AllowedHosts.
func ParseAllowedHosts(list string) ([]string, error) {
	var out []string
	for h := range strings.SplitSeq(list, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		host, err := parseAllowedHost(h)
		if err != nil {
			return nil, err
		}
		out = append(out, host)
	}
	return out, nil
}

// parseAllowedHost is one entry of ParseAllowedHosts, as hostOf reads a
// Host header: lower case, without brackets or a final dot.
func parseAllowedHost(h string) (string, error) {
	host := normalHost(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
	if ip := net.ParseIP(host); ip != nil {
		return ip.String(), nil
	}
	if !hostName(host) {
		return "", fmt.Errorf("%q is not a host name or an IP address: give each host as a Host header names it, without scheme, port or path (e.g. api.internal, 10.0.0.5)", h)
	}
	return host, nil
}

// hostName reports whether s is a DNS name: labels of letters, digits,
// '-' and '_', separated by dots.
func hostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normalHost is a host as the Host check compares it: lower case, without
// a final dot (localhost. is localhost).
func normalHost(h string) string {
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

// hostOf is the host of a Host header ("127.0.0.1:8080", "[::1]:8080",
// "localhost"): without its port and an IPv6 address's brackets, as
// normalHost; an address in its canonical form.
func hostOf(header string) string {
	host, _, err := net.SplitHostPort(header)
	if err != nil { // no port
		host = strings.TrimSuffix(strings.TrimPrefix(header, "["), "]")
	}
	host = normalHost(host)
	if ip := net.ParseIP(host); ip != nil {
		return ip.String()
	}
	return host
}

// loopbackHost reports whether host (as hostOf gives it) names this
// machine only: localhost, a name under .localhost (RFC 6761), or an
// address of 127.0.0.0/8 or ::1.
func loopbackHost(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHost is the Host check of an API without tokens: nil when r's Host
// is loopback or allowed, else 403 host_not_allowed.
func (s *Server) checkHost(r *http.Request) error {
	host := hostOf(r.Host)
	if loopbackHost(host) || s.allowedHost[host] {
		return nil
	}
	return &coupon.Error{Code: api.CodeHostNotAllowed, Message: "the Host " + strconv.Quote(r.Host) +
		" is refused: an API without tokens answers only requests for a loopback name or address (localhost, 127.0.0.1, [::1]) " +
		"or a host of -allowed-hosts (COUPONLINK_API_ALLOWED_HOSTS), so that a web page cannot reach it by pointing its own name at this address " +
		"(DNS rebinding); add the host to -allowed-hosts, or serve with tokens (-token-file); nothing was written"}
}
