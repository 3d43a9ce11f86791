package mysql_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// grantSections maps each "== flavor: X ==" section of grants.sql to its
// GRANT statements, commented or not (a MySQL section is commented out),
// and says whether each section is live (uncommented) SQL.
func grantSections(t *testing.T) (grants map[string][]string, live map[string]bool) {
	t.Helper()
	raw, err := os.ReadFile("grants.sql")
	require.NoError(t, err)
	grants, live = map[string][]string{}, map[string]bool{}
	section := ""
	for _, l := range strings.Split(string(raw), "\n") {
		l = strings.TrimSpace(l)
		if name, ok := strings.CutPrefix(l, "-- == flavor: "); ok {
			section = name[:strings.Index(name, " ==")]
			continue
		}
		if strings.HasPrefix(l, "-- == every flavor ==") || strings.HasPrefix(l, "-- ----") {
			section = ""
			continue
		}
		stmt := strings.TrimPrefix(l, "-- ")
		if section == "" || !strings.HasPrefix(stmt, "GRANT ") {
			continue
		}
		grants[section] = append(grants[section], stmt)
		live[section] = live[section] || !strings.HasPrefix(l, "--")
	}
	return grants, live
}

// grants.sql has a section per flavor: MariaDB's live, the MySQL ones
// commented out, each granting both binlog users what a binlog reader and
// a locked snapshot need on that flavor (RELOAD, or LOCK TABLES without
// it), and only those lines.
func TestGrantsSectionPerFlavor(t *testing.T) {
	grants, live := grantSections(t)
	require.ElementsMatch(t, []string{"MariaDB 10.5.2+ (live; tested)", "MySQL 5.7 / 8.0 (untested)", "MySQL 8.4 (untested)"}, keys(grants))
	for section, stmts := range grants {
		mariadb := strings.HasPrefix(section, "MariaDB")
		require.Equal(t, mariadb, live[section], "%s: only MariaDB's section runs as is", section)
		for _, user := range []string{"couponlink_cdc", "couponlink_reconcile"} {
			all := ""
			for _, s := range stmts {
				if strings.Contains(s, "'"+user+"'") {
					all += s + "\n"
				}
			}
			require.Contains(t, all, "REPLICATION SLAVE", "%s %s", section, user)
			if mariadb {
				require.Contains(t, all, "BINLOG MONITOR", "%s %s", section, user)
				continue
			}
			require.Contains(t, all, "REPLICATION CLIENT", "%s %s", section, user)
			require.Contains(t, all, "RELOAD ON *.*", "%s %s", section, user)
			require.Contains(t, all, "LOCK TABLES ON `couponlink_db`.*", "%s %s: the managed-MySQL alternative", section, user)
			require.NotContains(t, all, "BINLOG MONITOR", "%s %s: MySQL has no BINLOG MONITOR", section, user)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
