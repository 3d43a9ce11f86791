// Package auth is who may call couponlink's API: named bearer tokens, each
// with a role (viewer, operator, admin), read from a token file and from
// COUPONLINK_API_TOKEN, kept as SHA-256 digests only, and compared in
// constant time.
//
// A token file has one token a line, "name role sha256:<hex digest>"
// (`couponlink token new` makes a token and its line); blank lines and
// lines starting with # are skipped. A file that holds no token, or that
// its group, everyone or a user other than the process's (or root) may
// write, is refused, and a reload (Replace) never goes from some tokens to
// none: either would open the API. SHA-256, not a slow password hash,
// is enough because every token is a random value of at least 32 bytes:
// no dictionary or brute force can reach a 256-bit preimage, so a leaked
// file gives nobody a token, and the slowness bcrypt or argon2 adds for a
// person's low-entropy password would buy nothing here while costing each
// request. The digest of the presented token is compared with every stored
// digest in constant time, so neither a token's bytes nor which one
// matched show in the answer's timing.
package auth

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
)

// Role is what a token may do; each role may do what the ones below it may.
type Role int

// The roles, lowest first.
const (
	Viewer   Role = iota + 1 // reads: every GET
	Operator                 // claims, redemptions, refunds (services); voids, expiry, quota policy, resolve, acknowledge (people)
	Admin                    // templates, and everything else
)

var roleNames = map[Role]string{Viewer: "viewer", Operator: "operator", Admin: "admin"}

func (r Role) String() string {
	if n, ok := roleNames[r]; ok {
		return n
	}
	return fmt.Sprintf("role(%d)", int(r))
}

// ParseRole reads viewer, operator or admin.
func ParseRole(s string) (Role, error) {
	for r, n := range roleNames {
		if n == s {
			return r, nil
		}
	}
	return 0, fmt.Errorf("role %q is not viewer, operator or admin", s)
}

// Identity is the caller a token names: what the audit trail records.
type Identity struct {
	Name string
	Role Role
}

// entry is one stored token: its digest and whom it names.
type entry struct {
	sum [sha256.Size]byte
	id  Identity
}

// Tokens is the set of tokens the API accepts; Replace swaps it whole (on
// SIGHUP), safe beside Lookup.
type Tokens struct {
	set atomic.Pointer[[]entry]
}

// EnvTokenName is the name of COUPONLINK_API_TOKEN's token (an admin).
const EnvTokenName = "admin"

var (
	// ErrNoTokens is the error of a token file that holds no token.
	ErrNoTokens = errors.New("empty token file")
	// ErrUnsafeFile is the error of a token file someone else could change.
	ErrUnsafeFile = errors.New("unsafe token file")
	// ErrLastToken is the error of a Replace that would leave no token.
	ErrLastToken = errors.New("refusing to remove the last token")
)

// Load reads the token file (when file is not "") and adds the single
// token of COUPONLINK_API_TOKEN (when envToken is not "") as the admin
// named EnvTokenName. A weak or placeholder envToken is refused (Check),
// and so is a file that holds no token or that another user could change.
func Load(file, envToken string) (*Tokens, error) {
	var set []entry
	if file != "" {
		var err error
		if set, err = readFile(file); err != nil {
			return nil, err
		}
	}
	if envToken != "" {
		if err := Check(envToken); err != nil {
			return nil, fmt.Errorf("COUPONLINK_API_TOKEN: %w", err)
		}
		for _, e := range set {
			if e.id.Name == EnvTokenName {
				return nil, fmt.Errorf("%s names a token %q, the name COUPONLINK_API_TOKEN's token has", file, EnvTokenName)
			}
		}
		set = append(set, entry{sum: sha256.Sum256([]byte(envToken)), id: Identity{Name: EnvTokenName, Role: Admin}})
	}
	t := &Tokens{}
	t.set.Store(&set)
	return t, nil
}

// Replace swaps the set for next's (a reload: Load, then Replace). It
// refuses to go from some tokens to none, which would open the API: the
// tokens in use stay.
func (t *Tokens) Replace(next *Tokens) error {
	if next.Len() == 0 && t.Len() > 0 {
		return fmt.Errorf("%w: the reload has no token and would open the API to every caller, so the %d in use stay; "+
			"to serve without tokens, restart the api without -token-file on a loopback -addr, or with -insecure-no-auth", ErrLastToken, t.Len())
	}
	set := []entry{}
	if p := next.set.Load(); p != nil {
		set = *p
	}
	t.set.Store(&set)
	return nil
}

// Static is a set of plain tokens by name (tests, embedding programs); it
// does not Check them.
func Static(tokens map[string]Identity) *Tokens {
	set := make([]entry, 0, len(tokens))
	for tok, id := range tokens {
		set = append(set, entry{sum: sha256.Sum256([]byte(tok)), id: id})
	}
	t := &Tokens{}
	t.set.Store(&set)
	return t
}

// Len is how many tokens the set has; 0: the API is open.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	if p := t.set.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// Names are the tokens' names and roles ("alice=operator"), for the log.
func (t *Tokens) Names() []string {
	var out []string
	if p := t.set.Load(); p != nil {
		for _, e := range *p {
			out = append(out, e.id.Name+"="+e.id.Role.String())
		}
	}
	return out
}

// Lookup is the identity of token: its digest is compared with every
// stored digest in constant time, all of them whatever matches.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	if t == nil || token == "" {
		return Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	var found Identity
	ok := 0
	if p := t.set.Load(); p != nil {
		for _, e := range *p {
			if subtle.ConstantTimeCompare(sum[:], e.sum[:]) == 1 {
				found, ok = e.id, 1
			}
		}
	}
	return found, ok == 1
}

var (
	nameRe   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$`)
	digestRe = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

// CheckName refuses a token name that is not 1 to 64 letters, digits,
// '.', '_', '@' or '-' (the identity the audit trail records).
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("the name %q is not 1 to 64 letters, digits, '.', '_', '@' or '-'", name)
	}
	return nil
}

// readFile reads a token file: "name role sha256:<hex>" a line.
func readFile(file string) ([]entry, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	if err := checkFileSafe(file, fi); err != nil {
		return nil, err
	}
	var set []entry
	names := map[string]bool{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		where := fmt.Sprintf("token file %s line %d", file, n)
		fields := strings.Fields(line)
		if len(fields) != 3 {
			return nil, fmt.Errorf("%s: want \"name role sha256:<hex digest>\" (couponlink token new makes one), got %d fields", where, len(fields))
		}
		name, roleName, digest := fields[0], fields[1], fields[2]
		if err := CheckName(name); err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if names[name] {
			return nil, fmt.Errorf("%s: the name %q is there twice", where, name)
		}
		names[name] = true
		role, err := ParseRole(roleName)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if !digestRe.MatchString(digest) {
			return nil, fmt.Errorf("%s: the token must be stored as sha256:<64 lowercase hex digits>, its digest, never the token itself", where)
		}
		e := entry{id: Identity{Name: name, Role: role}}
		hex.Decode(e.sum[:], []byte(digest[len("sha256:"):]))
		set = append(set, e)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", file, err)
	}
	if len(set) == 0 {
		return nil, fmt.Errorf("%w: %s holds no token (it is empty, or only blank lines and comments): "+
			"add a line made by `couponlink token new -name NAME -role ROLE`; to serve the API without tokens, "+
			"run it without -token-file on a loopback -addr, or with -insecure-no-auth", ErrNoTokens, file)
	}
	return set, nil
}

// Digest is a token's line form in a token file: sha256:<hex>.
func Digest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// MinEntropyBits is the least entropy a token may have: 32 bytes.
const MinEntropyBits = 256

// placeholders are the words of example and default tokens, found in a
// token whatever its case and punctuation.
var placeholders = []string{"changeme", "change", "secret", "password", "passwd", "example", "placeholder", "replace", "default", "token", "test", "xxxx", "todo"}

// ErrWeak is the error of a token Check refuses.
var ErrWeak = errors.New("weak token")

// Check refuses a token of less than 32 bytes of entropy (estimated from
// its length and the characters it uses: 64 hex digits, or 43 base64url
// characters, are the least) or one that holds a placeholder word
// (CHANGE-ME, changeme, secret, ...).
func Check(token string) error {
	plain := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			return r
		}
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return -1
	}, token)
	for _, p := range placeholders {
		if strings.Contains(plain, p) {
			return fmt.Errorf("%w: it holds the placeholder %q; make one with `couponlink token new`", ErrWeak, p)
		}
	}
	if bits := EntropyBits(token); bits < MinEntropyBits {
		return fmt.Errorf("%w: about %.0f bits of entropy, less than %d (32 random bytes: 64 hex digits or 43 base64url characters); make one with `couponlink token new`",
			ErrWeak, bits, MinEntropyBits)
	}
	return nil
}

// EntropyBits estimates a token's entropy: its length times the bits of
// the smallest usual alphabet that holds all its characters (hex 4,
// lowercase and digits 5.17, base64url 6, printable ASCII 6.57); a token
// of fewer than 10 distinct characters counts only those (one repeated
// character has none).
func EntropyBits(token string) float64 {
	alphabet := 95.0
	switch {
	case strings.Trim(token, "0123456789abcdef") == "":
		alphabet = 16
	case strings.Trim(token, "0123456789abcdefghijklmnopqrstuvwxyz") == "":
		alphabet = 36
	case strings.Trim(token, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") == "":
		alphabet = 64
	}
	distinct := map[rune]bool{}
	for _, r := range token {
		distinct[r] = true
	}
	if d := float64(len(distinct)); d < 10 {
		alphabet = d
	}
	if alphabet < 2 {
		return 0
	}
	return float64(len(token)) * math.Log2(alphabet)
}

// NewToken is a new random token: 32 bytes from crypto/rand, in hex.
func NewToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24 and later)
	return hex.EncodeToString(b)
}
