package canal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func goodSettings(version string) serverSettings {
	s := serverSettings{srv: ParseServer(version), logBin: "1", format: "ROW", rowImage: "FULL", rowMetadata: "FULL"}
	if !s.srv.MariaDB {
		s.gtidMode, s.enforceGTIDs = "ON", "ON"
	}
	return s
}

// The start-up checks per flavor, on fake settings: each problem names its
// setting and the fix, and a good server has none.
func TestServerSettingsMessages(t *testing.T) {
	for _, v := range []string{"10.11.19-MariaDB", "5.7.44-log", "8.0.36", "8.4.3"} {
		require.NoError(t, goodSettings(v).problems(), v)
		require.Empty(t, goodSettings(v).warnings(), v)
	}
	for _, c := range []struct {
		name    string
		version string
		edit    func(*serverSettings)
		problem string // in problems(), or
		warning string // in warnings()
	}{
		{"binlog off", "8.0.36", func(s *serverSettings) { s.logBin = "0" }, "log_bin=OFF); start MySQL 8.0.36 with --log-bin", ""},
		{"binlog off MariaDB", "10.11.19-MariaDB", func(s *serverSettings) { s.logBin = "OFF" }, "start MariaDB 10.11.19-MariaDB with --log-bin", ""},
		{"statement format", "5.7.44-log", func(s *serverSettings) { s.format = "STATEMENT" }, "binlog_format is STATEMENT, couponlink needs ROW (SET GLOBAL binlog_format=ROW", ""},
		{"mixed format", "10.11.19-MariaDB", func(s *serverSettings) { s.format = "mixed" }, "binlog_format is MIXED", ""},
		{"minimal image", "8.4.3", func(s *serverSettings) { s.rowImage = "MINIMAL" }, "binlog_row_image is MINIMAL, couponlink needs FULL (SET GLOBAL binlog_row_image=FULL", ""},
		{"gtid off", "8.0.36", func(s *serverSettings) { s.gtidMode, s.enforceGTIDs = "OFF", "OFF" }, "", "gtid_mode is OFF: couponlink resumes by file and offset only and cannot follow a failover to another server; set gtid_mode=ON with enforce_gtid_consistency=ON"},
		{"gtid permissive", "5.7.44-log", func(s *serverSettings) { s.gtidMode = "ON_PERMISSIVE" }, "", "gtid_mode is ON_PERMISSIVE"},
		{"enforce off", "8.4.3", func(s *serverSettings) { s.enforceGTIDs = "WARN" }, "", "enforce_gtid_consistency is WARN; set it ON"},
		{"row metadata", "8.0.36", func(s *serverSettings) { s.rowMetadata = "MINIMAL" }, "", "binlog_row_metadata is MINIMAL; FULL (SET PERSIST binlog_row_metadata=FULL on MySQL"},
		{"row metadata MariaDB", "10.11.19-MariaDB", func(s *serverSettings) { s.rowMetadata = "NO_LOG" }, "", "binlog_row_metadata is NO_LOG"},
		{"no repl client", "8.0.36", func(s *serverSettings) {
			s.grants = []string{"GRANT REPLICATION SLAVE ON *.* TO `cdc`@`%`", "GRANT SELECT ON `shop`.* TO `cdc`@`%`"}
		}, "", "shows no REPLICATION CLIENT; the cdc needs REPLICATION CLIENT (deploy/mysql/grants.sql, the MySQL 5.7/8.0 section)"},
		{"no binlog monitor", "10.11.19-MariaDB", func(s *serverSettings) {
			s.grants = []string{"GRANT REPLICATION SLAVE, SUPER ON *.* TO `cdc`@`%`"}
		}, "", "shows no BINLOG MONITOR; the cdc needs BINLOG MONITOR (deploy/mysql/grants.sql, the MariaDB section)"},
		{"no privileges 8.4", "8.4.3", func(s *serverSettings) {
			s.grants = []string{"GRANT USAGE ON *.* TO `cdc`@`%`", "GRANT SELECT ON `shop`.* TO `cdc`@`%`"}
		}, "", "shows no REPLICATION SLAVE, REPLICATION CLIENT; the cdc needs REPLICATION SLAVE and REPLICATION CLIENT (deploy/mysql/grants.sql, the MySQL 8.4 section)"},
	} {
		s := goodSettings(c.version)
		c.edit(&s)
		err := s.problems()
		if c.problem == "" {
			require.NoError(t, err, c.name)
		} else {
			require.ErrorContains(t, err, c.problem, c.name)
		}
		w := strings.Join(s.warnings(), "\n")
		if c.warning == "" {
			require.Empty(t, w, c.name)
		} else {
			require.Contains(t, w, c.warning, c.name)
		}
	}
}

// Grants that hold what a binlog reader needs, as each flavor prints them.
func TestServerGrantsEnough(t *testing.T) {
	for v, grants := range map[string][]string{
		"10.11.19-MariaDB": {"GRANT SELECT, REPLICATION SLAVE, BINLOG MONITOR ON *.* TO `couponlink_cdc`@`%`"},
		"10.3.39-MariaDB":  {"GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%'"},
		"8.0.36":           {"GRANT RELOAD, REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO `cdc`@`%`"},
		"5.7.44-log":       {"GRANT SUPER, REPLICATION SLAVE ON *.* TO 'cdc'@'%'"},
		"8.4.3":            {"GRANT ALL PRIVILEGES ON *.* TO `root`@`localhost` WITH GRANT OPTION"},
	} {
		s := goodSettings(v)
		s.grants = grants
		require.Empty(t, s.missingPrivileges(), v)
	}
}
