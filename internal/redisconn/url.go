package redisconn

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// target is what an address list names: the nodes (host:port) and, from
// its redis:// or rediss:// URLs, the credentials, the database and TLS.
type target struct {
	addrs   []string
	user    *url.Userinfo // nil: no URL gave credentials
	db      int
	tls     bool // a rediss:// URL
	schemes map[string]bool
	dbGiven bool
}

// parseAddrs reads an address list: each entry host:port or
// redis://[user:password@]host:port[/db] (rediss:// for TLS). The URLs
// of one list must agree on their scheme, credentials and database. Its
// errors show an entry only with its password hidden.
func parseAddrs(list string) (target, error) {
	t := target{schemes: map[string]bool{}}
	for i, a := range Addrs(list) {
		if !strings.Contains(a, "://") {
			t.addrs = append(t.addrs, a)
			continue
		}
		if err := t.addURL(a); err != nil {
			return t, fmt.Errorf("Redis address %d of -redis [COUPONLINK_REDIS_ADDR]: %w", i+1, err)
		}
	}
	if len(t.schemes) > 1 {
		return t, errors.New("-redis [COUPONLINK_REDIS_ADDR] mixes redis:// and rediss:// URLs: TLS is for every node or none")
	}
	return t, nil
}

// addURL adds one URL entry to t.
func (t *target) addURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil { // url.Parse's error quotes the URL, password and all
		return errors.New("not a URL (redis://[user:password@]host:port[/db])")
	}
	switch u.Scheme {
	case "redis", "rediss":
	default:
		return fmt.Errorf("scheme %q: want redis:// or rediss://", u.Scheme)
	}
	if u.Host == "" || u.Port() == "" {
		return errors.New("a URL without host:port")
	}
	if len(u.Query()) > 0 || u.Fragment != "" {
		return errors.New("a Redis URL takes no parameters: give TLS files with -redis-tls-ca, -redis-tls-cert, -redis-tls-key")
	}
	db, err := urlDB(u.Path)
	if err != nil {
		return err
	}
	if t.dbGiven && db != t.db {
		return errors.New("its database differs from another URL's")
	}
	if u.User != nil {
		if t.user != nil && t.user.String() != u.User.String() {
			return errors.New("its user:password differ from another URL's")
		}
		t.user = u.User
	}
	t.db, t.dbGiven = db, true
	t.tls = t.tls || u.Scheme == "rediss"
	t.schemes[u.Scheme] = true
	t.addrs = append(t.addrs, net.JoinHostPort(u.Hostname(), u.Port()))
	return nil
}

// urlDB is the database of a URL's path: "" or "/" is 0, "/3" is 3.
func urlDB(path string) (int, error) {
	p := strings.Trim(path, "/")
	if p == "" {
		return 0, nil
	}
	db, err := strconv.Atoi(p)
	if err != nil || db < 0 {
		return 0, fmt.Errorf("database %q is not a number", p)
	}
	return db, nil
}

// credentials are the user and password a connection authenticates
// with: the URL's when it has them, else o's.
func (t target) credentials(o Options) (user, password string) {
	if t.user == nil {
		return o.Username, o.Password
	}
	p, _ := t.user.Password()
	return t.user.Username(), p
}
