package canal

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
)

// A legacy shop sharded over several servers names each in sources: a
// MySQL/MariaDB server with its own DSN and, where its tables are named
// otherwise than the top-level mapping says, its own table sets. One cdc
// runs per source (couponlink cdc -source NAME); its checkpoint, leader
// lock and counters live on that source's server, in the transaction of
// the source's own binlog position, so the exactly-once argument is the
// one of a single server. A template's inventory is the sum over sources
// (couponlink status, couponlink reconcile).

// SourceSpec is one server of a mapping's sources.
type SourceSpec struct {
	// Name names the source: the cdc's -source, its checkpoint name, the
	// source label of its metrics.
	Name string `yaml:"name"`
	// DSN is the server's DSN, with couponlink's database (its tables are
	// created there by couponlink migrate); or DSNEnv names the
	// environment variable that holds it (keeps passwords out of the file).
	DSN    string `yaml:"dsn"`
	DSNEnv string `yaml:"dsn_env"`
	// The tables of the sharded roles on this server, when they differ
	// from the top-level mapping's (same columns): e.g. the schemas
	// shard_{0..1} on one server and shard_{2..3} on the other.
	UserCoupon    string `yaml:"user_coupon"`
	RedemptionLog string `yaml:"redemption_log"`
	Orders        string `yaml:"orders"`
	// Template is where the template table is readable on this server (a
	// copy kept on every shard, as sharding middlewares keep broadcast
	// tables); default: the top-level template.table.
	Template string `yaml:"template"`
}

// sourceName is what a source's name may be: it becomes a checkpoint name
// and a metric label.
var sourceName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,47}$`)

// HasSources reports whether the mapping spans several servers (sources:).
func (m *Mapping) HasSources() bool { return len(m.Sources) > 0 }

// SourceNames lists the sources' names in the mapping's order.
func (m *Mapping) SourceNames() []string {
	out := make([]string, len(m.Sources))
	for i, s := range m.Sources {
		out[i] = s.Name
	}
	return out
}

// ForSource is the mapping of one source: the top-level mapping with the
// source's tables, and no sources of its own. Its Source() is name.
func (m *Mapping) ForSource(name string) (*Mapping, SourceSpec, error) {
	i := slices.IndexFunc(m.Sources, func(s SourceSpec) bool { return s.Name == name })
	if i < 0 {
		if !m.HasSources() {
			return nil, SourceSpec{}, fmt.Errorf("source %q: the mapping names no sources (leave -source out, or add sources:)", name)
		}
		return nil, SourceSpec{}, fmt.Errorf("source %q is not in the mapping's sources (%s)", name, strings.Join(m.SourceNames(), ", "))
	}
	spec := m.Sources[i]
	c := *m
	c.Sources, c.source = nil, spec.Name
	c.resolved, c.shards = false, nil
	if spec.UserCoupon != "" {
		c.UserCoupon.Table = spec.UserCoupon
	}
	if spec.RedemptionLog != "" {
		c.RedemptionLog.Table = spec.RedemptionLog
	}
	if spec.Orders != "" && c.Orders != nil {
		o := *c.Orders
		o.Table = spec.Orders
		c.Orders = &o
	}
	if spec.Template != "" {
		c.Template.Table = spec.Template
	}
	c.judge = m.judgeSource()
	return &c, spec, nil
}

// Source is the name of the source this mapping was made for by ForSource
// ("" for a mapping of one server).
func (m *Mapping) Source() string { return m.source }

// ResolveDSN is the source's DSN: DSN, or the value of DSNEnv.
func (s SourceSpec) ResolveDSN() (string, error) {
	if s.DSN != "" {
		return s.DSN, nil
	}
	v := os.Getenv(s.DSNEnv)
	if v == "" {
		return "", fmt.Errorf("source %q: the environment variable %s (its dsn_env) is not set", s.Name, s.DSNEnv)
	}
	return v, nil
}

// validateSources checks the sources on their own: names, one DSN each,
// table overrides only for roles the mapping has, and each source's
// mapping valid.
func (m *Mapping) validateSources() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf("mapping: "+format, args...)) }
	names := map[string]bool{}
	dsns := map[string]string{}
	for i, s := range m.Sources {
		label := fmt.Sprintf("sources[%d]", i)
		switch {
		case !sourceName.MatchString(s.Name):
			bad("%s.name %q: a source needs a name of letters, digits, _ and - (at most 48), e.g. east", label, s.Name)
		case names[s.Name]:
			bad("%s.name %q is used twice; each source needs its own name", label, s.Name)
		}
		names[s.Name] = true
		label = fmt.Sprintf("source %q", s.Name)
		switch {
		case (s.DSN == "") == (s.DSNEnv == ""):
			bad("%s needs exactly one of dsn (the server's DSN) and dsn_env (the environment variable holding it)", label)
		case s.DSN != "":
			if prev, ok := dsns[s.DSN]; ok {
				bad("%s and source %q have the same dsn: one server counted twice would double its coupons", label, prev)
			}
			dsns[s.DSN] = s.Name
		}
		if s.RedemptionLog != "" && m.RedemptionEvidence() != EvidenceTable {
			bad("%s names redemption_log but redemption_evidence is %s", label, m.RedemptionEvidence())
		}
		if s.Orders != "" && m.Orders == nil {
			bad("%s names orders but the mapping has no orders table", label)
		}
		if len(errs) > 0 {
			continue
		}
		sm, _, _ := m.ForSource(s.Name)
		for _, err := range sm.validateTables() {
			errs = append(errs, fmt.Errorf("%s: %w", label, err))
		}
	}
	return errs
}

// errSourceNeeded is a mapping with sources used without naming one.
func errSourceNeeded(m *Mapping) error {
	return errors.New("the mapping names several sources (" + strings.Join(m.SourceNames(), ", ") +
		"): say which this process follows with -source (COUPONLINK_SOURCE)")
}

// OneSource is the mapping one process uses and its server's DSN: m
// itself and "" (the process's own -dsn) when m has no sources (name must
// then be empty), else m.ForSource(name) and the source's DSN.
func (m *Mapping) OneSource(name string) (*Mapping, string, error) {
	if !m.HasSources() {
		if name != "" {
			return nil, "", fmt.Errorf("-source %q: the mapping names no sources", name)
		}
		return m, "", nil
	}
	if name == "" {
		return nil, "", errSourceNeeded(m)
	}
	sm, spec, err := m.ForSource(name)
	if err != nil {
		return nil, "", err
	}
	dsn, err := spec.ResolveDSN()
	return sm, dsn, err
}
