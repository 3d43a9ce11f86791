// Package primaries spreads a couponlink-native deployment over several
// MySQL/MariaDB primaries, each with couponlink's whole schema: the list of
// primaries (a YAML file), the rule that says which primary owns a template
// or a coupon, the pools that keep the rule, and the start-up check that the
// rows already there obey it.
//
// The rule: with N primaries listed in order, primary k (0-based) owns
// every template and every coupon whose id satisfies (id - 1) mod N == k.
// MySQL keeps it by itself: every connection couponlink opens to primary k
// sets auto_increment_increment = N and auto_increment_offset = k + 1
// (mysqlconn.OpenPrimary), so each id it hands out is k + 1 + N·i. A
// template's channel buckets, its coupons, their redemptions and ledger
// rows are all written on the template's primary, in that primary's
// transactions: every claim's guard and its coupon stay on one server.
//
// The list is fixed once ids exist: a primary added, removed or moved
// changes N or k, and with them the owner of every existing id. Check
// refuses such a list, naming the first id that breaks the rule.
package primaries

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"

	"go.yaml.in/yaml/v3"

	"github.com/couponlink/couponlink/internal/mysqlconn"
	"github.com/couponlink/couponlink/internal/redact"
)

// Primary is one server of the list: its name (metrics, logs, placement)
// and couponlink's DSN on it.
type Primary struct {
	Name string
	DSN  string
}

// file is the YAML file:
//
//	primaries:
//	  - {name: p0, dsn: "root@tcp(db0:3306)/couponlink"}
//	  - {name: p1, dsn_env: COUPONLINK_P1_DSN}
type file struct {
	Primaries []entry `yaml:"primaries"`
}

type entry struct {
	Name   string `yaml:"name"`
	DSN    string `yaml:"dsn"`
	DSNEnv string `yaml:"dsn_env"`
}

var validName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Load reads the list of primaries from the YAML file at path; lookupEnv
// resolves dsn_env (os.LookupEnv in the command).
func Load(path string, lookupEnv func(string) (string, bool)) ([]Primary, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the list of primaries: %w", err)
	}
	ps, err := Parse(data, lookupEnv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return ps, nil
}

// Parse reads a list of primaries. Unknown keys, a missing or repeated
// name, an entry with both or neither of dsn and dsn_env, an unset
// variable, a DSN without a database and two entries on one database are
// refused, naming the entry.
func Parse(data []byte, lookupEnv func(string) (string, bool)) ([]Primary, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var f file
	if err := dec.Decode(&f); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("the file is empty: want primaries: [{name: p0, dsn: ...}, ...]")
		}
		return nil, err
	}
	if len(f.Primaries) == 0 {
		return nil, errors.New("no primaries listed: want primaries: [{name: p0, dsn: ...}, ...]")
	}
	out := make([]Primary, 0, len(f.Primaries))
	names := map[string]int{}
	dbs := map[string]string{}
	for i, e := range f.Primaries {
		where := fmt.Sprintf("primaries[%d]", i)
		if !validName.MatchString(e.Name) {
			return nil, fmt.Errorf("%s: name %q must be 1 to 64 letters, digits, _ or -", where, e.Name)
		}
		where = fmt.Sprintf("%s (%s)", where, e.Name)
		if j, ok := names[e.Name]; ok {
			return nil, fmt.Errorf("%s: the name is already used by primaries[%d]", where, j)
		}
		names[e.Name] = i
		dsn, err := e.dsn(lookupEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		cfg, err := mysqlconn.Config(dsn)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if cfg.DBName == "" {
			return nil, fmt.Errorf("%s: the DSN %s names no database", where, redact.String(dsn))
		}
		db := cfg.Net + "(" + cfg.Addr + ")/" + cfg.DBName
		if other, ok := dbs[db]; ok {
			return nil, fmt.Errorf("%s: %s is already primary %s: each primary is its own database", where, db, other)
		}
		dbs[db] = e.Name
		out = append(out, Primary{Name: e.Name, DSN: dsn})
	}
	if len(out) > 65535 {
		return nil, fmt.Errorf("%d primaries: at most 65535 (auto_increment_increment)", len(out))
	}
	return out, nil
}

func (e entry) dsn(lookupEnv func(string) (string, bool)) (string, error) {
	switch {
	case e.DSN != "" && e.DSNEnv != "":
		return "", errors.New("give dsn or dsn_env, not both")
	case e.DSN != "":
		return e.DSN, nil
	case e.DSNEnv == "":
		return "", errors.New("dsn or dsn_env is required")
	}
	v, ok := lookupEnv(e.DSNEnv)
	if !ok || v == "" {
		return "", fmt.Errorf("dsn_env %s is not set", e.DSNEnv)
	}
	return v, nil
}

// Owner is the index of the primary of n that owns the template or coupon
// id: (id - 1) mod n. An id below 1 is owned by none (-1).
func Owner(id int64, n int) int {
	if id < 1 || n < 1 {
		return -1
	}
	return int((id - 1) % int64(n))
}
