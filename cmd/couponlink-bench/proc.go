package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// procMem reads VmRSS and VmHWM (bytes) of a process.
func procMem(pid int) (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	return parseMem(string(b))
}

// parseMem reads VmRSS and VmHWM (bytes) of a /proc/<pid>/status text.
func parseMem(status string) (rss, hwm int64, err error) {
	for line := range strings.SplitSeq(status, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS in /proc status")
	}
	return rss, hwm, nil
}

// procCPU is a process's user+system CPU time (0 when unknown), from
// /proc/<pid>/stat.
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return parseStatCPU(string(b))
}

// parseStatCPU is the user+system CPU time of a /proc/<pid>/stat line, in
// clock ticks of 10 ms (USER_HZ on Linux); 0 when it cannot be read.
func parseStatCPU(stat string) time.Duration {
	i := strings.LastIndexByte(stat, ')') // the command may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// mariadbCPU is the private MariaDB's CPU time so far.
func (e *env) mariadbCPU() time.Duration {
	pid := e.mariadbPID()
	if pid <= 0 {
		return 0
	}
	return procCPU(pid)
}

// mariadbPID is the private MariaDB's pid (its pid file); 0 when unknown.
func (e *env) mariadbPID() int {
	b, err := os.ReadFile(filepath.Join(e.dir, "servers", "mysqld.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// statusCounters are the server's statement counters that tell what one
// request costs in round trips.
var statusCounters = []string{"Com_stmt_prepare", "Com_stmt_execute", "Com_stmt_close", "Com_select", "Com_insert",
	"Com_update", "Com_begin", "Com_commit", "Com_rollback", "Com_set_option"}

// serverStatus reads the statusCounters.
func (e *env) serverStatus(ctx context.Context) (map[string]int64, error) {
	return globalStatus(ctx, e.db, "WHERE Variable_name IN ('"+strings.Join(statusCounters, "','")+"')")
}

// globalStatus reads the server's status variables that filter selects
// (SHOW GLOBAL STATUS <filter>).
func globalStatus(ctx context.Context, db *sql.DB, filter string) (map[string]int64, error) {
	rows, err := db.QueryContext(ctx, "SHOW GLOBAL STATUS "+filter)
	if err != nil {
		return nil, fmt.Errorf("show global status: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k string
		var v int64
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		out[k] = v
	}
	return out, rows.Err()
}

// perOp renders the counters' growth per operation, e.g.
// "prepare 5.0, execute 5.0, close 5.0, select 2.0, commit 1.0".
func perOp(before, after map[string]int64, ops int) string {
	if ops == 0 || before == nil || after == nil {
		return "n/a"
	}
	var parts []string
	for _, k := range statusCounters {
		if d := after[k] - before[k]; d > 0 {
			parts = append(parts, fmt.Sprintf("%s %.1f", strings.TrimPrefix(strings.TrimPrefix(k, "Com_stmt_"), "Com_"), float64(d)/float64(ops)))
		}
	}
	return strings.Join(parts, ", ")
}
