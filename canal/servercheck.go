package canal

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// serverSettings are the server variables and grants the start-up checks
// look at ("" for a variable the server does not have).
type serverSettings struct {
	srv                                 Server
	logBin, format, rowImage            string
	rowMetadata, gtidMode, enforceGTIDs string
	grants                              []string // SHOW GRANTS of the current user
}

// readServerSettings reads them on conn (a variable missing on this
// server, or a SHOW GRANTS refused, stays empty).
func readServerSettings(ctx context.Context, q queryer) (serverSettings, error) {
	srv, err := ReadServer(ctx, q)
	if err != nil {
		return serverSettings{}, err
	}
	s := serverSettings{srv: srv}
	var logBin, format, image sql.NullString
	if err := q.QueryRowContext(ctx, "SELECT @@GLOBAL.log_bin, @@GLOBAL.binlog_format, @@GLOBAL.binlog_row_image").
		Scan(&logBin, &format, &image); err != nil {
		return s, fmt.Errorf("check binlog settings: %w", err)
	}
	s.logBin, s.format, s.rowImage = logBin.String, format.String, image.String
	for v, dst := range map[string]*string{"binlog_row_metadata": &s.rowMetadata, "gtid_mode": &s.gtidMode,
		"enforce_gtid_consistency": &s.enforceGTIDs} {
		var val sql.NullString
		if q.QueryRowContext(ctx, "SELECT @@GLOBAL."+v).Scan(&val) == nil { // unknown on this server: ""
			*dst = val.String
		}
	}
	s.grants, _ = stringList(ctx, q, "SHOW GRANTS")
	return s, nil
}

// problems are the settings couponlink cannot work with: each names the
// setting and the fix.
func (s serverSettings) problems() error {
	var errs []error
	if v := strings.ToUpper(s.logBin); v != "1" && v != "ON" {
		errs = append(errs, fmt.Errorf("server: the binlog is off (log_bin=OFF); start %s with --log-bin and a --server-id", s.srv))
	}
	if v := strings.ToUpper(s.format); v != "ROW" {
		errs = append(errs, fmt.Errorf("server: binlog_format is %s, couponlink needs ROW (SET GLOBAL binlog_format=ROW and in the server config)", v))
	}
	if v := strings.ToUpper(s.rowImage); v != "FULL" {
		errs = append(errs, fmt.Errorf("server: binlog_row_image is %s, couponlink needs FULL (SET GLOBAL binlog_row_image=FULL and in the server config)", v))
	}
	return errors.Join(errs...)
}

// warnings are the settings couponlink works with, at a cost each names.
func (s serverSettings) warnings() []string {
	var out []string
	if !s.srv.MariaDB && !strings.EqualFold(s.gtidMode, "ON") {
		out = append(out, fmt.Sprintf("server: gtid_mode is %s: couponlink resumes by file and offset only and cannot follow a failover to another server; set gtid_mode=ON with enforce_gtid_consistency=ON (through OFF_PERMISSIVE and ON_PERMISSIVE on a live server)", orUnknown(s.gtidMode)))
	}
	if !s.srv.MariaDB && strings.EqualFold(s.gtidMode, "ON") && !strings.EqualFold(s.enforceGTIDs, "ON") {
		out = append(out, fmt.Sprintf("server: enforce_gtid_consistency is %s; set it ON (MySQL requires it with gtid_mode=ON)", orUnknown(s.enforceGTIDs)))
	}
	if s.rowMetadata != "" && !strings.EqualFold(s.rowMetadata, "FULL") {
		out = append(out, fmt.Sprintf("server: binlog_row_metadata is %s; FULL (SET PERSIST binlog_row_metadata=FULL on MySQL, binlog_row_metadata=FULL in the MariaDB config) writes column names into the binlog, which lets a replay across an ALTER be checked against them", s.rowMetadata))
	}
	if missing := s.missingPrivileges(); len(missing) > 0 {
		out = append(out, fmt.Sprintf("server: SHOW GRANTS of this user shows no %s; the cdc needs %s (deploy/mysql/grants.sql, the %s section) unless a role grants it",
			strings.Join(missing, ", "), strings.Join(missing, " and "), s.grantsSection()))
	}
	return out
}

// missingPrivileges lists the global privileges a binlog reader needs that
// the user's grants do not show: REPLICATION SLAVE, and BINLOG MONITOR
// (MariaDB 10.5.2+) or REPLICATION CLIENT (MySQL, older MariaDB). None
// when the grants are unknown.
func (s serverSettings) missingPrivileges() []string {
	if len(s.grants) == 0 {
		return nil
	}
	global := ""
	for _, g := range s.grants {
		u := strings.ToUpper(g)
		if strings.Contains(u, " ON *.* ") {
			global += u
		}
	}
	if strings.Contains(global, "ALL PRIVILEGES") {
		return nil
	}
	var missing []string
	if !strings.Contains(global, "REPLICATION SLAVE") && !strings.Contains(global, "REPLICATION REPLICA") {
		missing = append(missing, "REPLICATION SLAVE")
	}
	monitor := "REPLICATION CLIENT"
	if s.srv.MariaDB && (s.srv.AtLeast(10, 6) || s.srv.Major == 10 && s.srv.Minor == 5 && s.srv.Patch >= 2) {
		monitor = "BINLOG MONITOR"
	}
	if !strings.Contains(global, monitor) && (monitor != "REPLICATION CLIENT" || !strings.Contains(global, "SUPER")) {
		missing = append(missing, monitor)
	}
	return missing
}

func (s serverSettings) grantsSection() string {
	switch {
	case s.srv.MariaDB:
		return "MariaDB"
	case s.srv.AtLeast(8, 4):
		return "MySQL 8.4"
	}
	return "MySQL 5.7/8.0"
}

func orUnknown(v string) string {
	if v == "" {
		return "unknown (no such variable)"
	}
	return v
}

// ServerWarnings are the settings of db's server that couponlink works
// with at a cost (gtid_mode off on MySQL, binlog_row_metadata not FULL, a
// privilege the grants do not show), each with its fix: the cdc logs them
// at start.
func ServerWarnings(ctx context.Context, db *sql.DB) ([]string, error) {
	s, err := readServerSettings(ctx, db)
	if err != nil {
		return nil, err
	}
	return s.warnings(), nil
}
