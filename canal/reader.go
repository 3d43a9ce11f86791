package canal

import (
	"context"
	"fmt"
	"log/slog"

	gocanal "github.com/go-mysql-org/go-mysql/canal"
	"github.com/go-mysql-org/go-mysql/mysql"
	"github.com/go-mysql-org/go-mysql/replication"
)

// reader is the go-mysql event handler of one binlog connection: it decodes
// the rows of the open transaction into tx and, at the transaction's end
// (XID, or a COMMIT/DDL query event), commits them to the batcher together
// with the position after that event. A new reader (empty tx) is made for
// every (re)connection, which always starts at a transaction boundary.
type reader struct {
	gocanal.DummyEventHandler
	ctx   context.Context
	log   *slog.Logger
	dec   *decoder
	b     *batcher
	gtid  gtidTracker // may be nil
	st    *stats
	file  string // current binlog file
	tx    Batch  // rows of the open transaction
	fatal error  // why the reader stopped the stream, if it did

	commits int
}

func (r *reader) fail(err error) error {
	r.fatal = err
	return err
}

func (r *reader) OnRow(e *gocanal.RowsEvent) error {
	r.st.events.Add(1)
	if _, err := r.dec.decode(e, &r.tx); err != nil {
		return r.fail(err)
	}
	return nil
}

func (r *reader) OnGTID(h *replication.EventHeader, ev mysql.BinlogGTIDEvent) error {
	r.st.events.Add(1)
	if r.tx.Rows > 0 {
		// The previous transaction had rows but no end event we understood
		// (e.g. an unparsable query event): a GTID event starts a new event
		// group, so the previous one ended where this event begins.
		r.log.Warn("transaction without a recognised end; committing it at the next GTID event",
			"file", r.file, "pos", h.LogPos-h.EventSize)
		if err := r.commit(h.Timestamp, r.file, h.LogPos-h.EventSize); err != nil {
			return err
		}
	}
	if r.gtid != nil {
		if err := r.gtid.begin(ev); err != nil {
			return r.fail(err)
		}
	}
	return nil
}

func (r *reader) OnRotate(_ *replication.EventHeader, e *replication.RotateEvent) error {
	r.st.events.Add(1)
	r.file = string(e.NextLogName)
	return nil
}

// OnPosSynced is called by go-mysql after a rotate, an XID event and every
// query event but BEGIN/SAVEPOINT (COMMIT of a non-transactional change,
// DDL): all but the rotate end a transaction. A nil header comes from Close.
func (r *reader) OnPosSynced(h *replication.EventHeader, pos mysql.Position, _ mysql.GTIDSet, _ bool) error {
	if h == nil {
		return nil
	}
	r.st.events.Add(1)
	if h.EventType == replication.ROTATE_EVENT {
		// After a GTID start the first rotate is a fake (file, 4): keep the
		// position of the last commit (docs/binlog.md #4); End moves at the
		// next commit.
		r.file = pos.Name
		return nil
	}
	return r.commit(h.Timestamp, pos.Name, pos.Pos)
}

func (r *reader) commit(ts uint32, file string, pos uint32) error {
	full := r.b.commit(&r.tx, file, pos, ts)
	r.st.lastTS.Store(ts)
	r.commits++
	if r.tx.Rows > 0 {
		r.st.rows.Add(uint64(r.tx.Rows))
		r.tx.reset()
	}
	if full {
		return r.b.waitRoom(r.ctx)
	}
	return nil
}

// OnTableChanged comes before OnDDL for a DDL on any table of any schema.
// For a source table, go-mysql has dropped its cached definition and will
// re-read the current one at the next row event; drop the column indexes
// too so that they are located again (a mapped column that is gone is then
// an error).
func (r *reader) OnTableChanged(_ *replication.EventHeader, sch, tbl string) error {
	if r.dec.isSource(sch, tbl) {
		r.log.Info("DDL on a source table: its columns will be located again", "table", sch+"."+tbl)
		r.dec.forget(sch, tbl)
	} else if r.dec.inPattern(sch, tbl) {
		r.log.Warn("DDL on a table that a shard pattern of the mapping matches but the cdc does not follow: "+
			"a shard table created after the start is followed only after a restart (run -rebuild if rows were written to it meanwhile)",
			"table", sch+"."+tbl)
	}
	return nil
}

func (r *reader) OnTableNotFound(_ *replication.EventHeader, e *replication.RowsEvent) error {
	return r.fail(fmt.Errorf("rows of %s.%s, but the table does not exist now (dropped or renamed after this binlog was written): %w; %s",
		e.Table.Schema, e.Table.Table, ErrSchemaChanged, errRebuildHint))
}

func (r *reader) String() string { return "couponlink-canal" }
