package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// What the phases share to wait on a process or a server, read a cdc's
// checkpoint and count CPU time.

// errTimedOut is poll's error when its limit passed.
var errTimedOut = errors.New("timed out")

// poll calls done every interval until it reports true or an error, ctx
// ends, or limit passes (errTimedOut).
func poll(ctx context.Context, interval, limit time.Duration, done func() (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		if ok, err := done(); ok || err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return errTimedOut
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// checkpointRef is a cdc's checkpoint: the row of that name in table
// (e.g. `cl_one`.cdc_checkpoint) of db.
type checkpointRef struct {
	db          *sql.DB
	table, name string
}

// checkpoint is the default cdc's checkpoint in couponlink's database.
func (e *env) checkpoint() checkpointRef { return checkpointRef{e.db, "cdc_checkpoint", "default"} }

// read reads the checkpoint; none yet is the zero position.
func (r checkpointRef) read(ctx context.Context) (events int64, pos canal.Position, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT events_applied, binlog_file, binlog_pos, gtid_set FROM `+r.table+` WHERE name = ?`, r.name).
		Scan(&events, &pos.File, &pos.Pos, &pos.GTID)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, canal.Position{}, nil
	}
	if err != nil {
		err = fmt.Errorf("read checkpoint: %w", err)
	}
	return events, pos, err
}

// wait polls the checkpoint until it is at or after target; the cdc c
// exiting first, or limit passing, is an error.
func (r checkpointRef) wait(ctx context.Context, c *child, target canal.Position, limit time.Duration) error {
	var pos canal.Position
	err := poll(ctx, 10*time.Millisecond, limit, func() (bool, error) {
		if err := c.exited(); err != nil {
			return false, fmt.Errorf("couponlink cdc %w", err)
		}
		_, p, err := r.read(ctx)
		pos = p
		return p.File != "" && p.Compare(target) >= 0, err
	})
	if errors.Is(err, errTimedOut) {
		return fmt.Errorf("couponlink cdc: checkpoint %s did not reach %s in %s; log:\n%s", pos, target, limit, tail(c.log, 10))
	}
	return err
}

// cpuMark is this process's and a MariaDB's CPU time at one moment.
type cpuMark struct {
	e        *env
	self, db time.Duration
}

func (e *env) cpuMark() cpuMark { return cpuMark{e, cpuTime(), e.mariadbCPU()} }

// since is the CPU time this process and the MariaDB used since the mark.
func (m cpuMark) since() (self, db time.Duration) {
	return cpuTime() - m.self, m.e.mariadbCPU() - m.db
}
