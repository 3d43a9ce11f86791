package sink

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/couponlink/couponlink/canal"
)

// The mail a source's cdc leaves the judge (cdc_sources_mail, on the
// source's own server) is pruned by the source's own cdc, once the judge
// has decided it: the judge saves how far it has read each source's mail
// (cdc_sources_state, kind 'mail') in the transaction of its decisions and
// its checkpoint, and the source's mail chore reads that seq on the
// judge's server (read only, bounded by peerTimeout) and deletes its rows
// up to it, in small autocommitted chunks. A row is removed only after the
// decision that covers it is committed: a judge killed before its commit
// reads the rows again; a judge killed after it, or a source killed while
// it deletes, leaves rows already decided that the next pass deletes. The
// judge reads from its saved seq on, never below it, so a row it decided
// and a row gone are the same to it. While the judge cannot be asked, or
// has not decided, the mail waits (couponlink_cdc_sources_mail_rows); the
// chore runs beside the batches, so a judge's server that is down holds
// no batch up.
//
// The seq must never go back: the table keeps its AUTO_INCREMENT over a
// restart of the server when empty (MariaDB 10.2.4+, MySQL 8.0+).

// mailPruneEvery is the mail chore's interval; mailPruneChunk bounds one
// DELETE, and mailPruneChunks one pass (the rest waits for the next).
const (
	mailPruneEvery  = 2 * time.Second
	mailPruneChunk  = 200
	mailPruneChunks = 50
)

// mails says whether this source's cdc mails the judge (crossWriteOffs).
func (s *Sink) mails() bool {
	m := s.cfg.Mapping
	return m.Source() != "" && len(s.peers) > 0 && m.RedemptionEvidence() == canal.EvidenceTable && m.RedemptionLog.Order != "" &&
		!s.cfg.RedemptionUnique
}

// judgeDB is the judge's server: this one, or the peer that is the judge.
func (s *Sink) judgeDB() (*sql.DB, bool) {
	judge := s.cfg.Mapping.Judge()
	if judge == s.cfg.Name {
		return s.db, true
	}
	for _, p := range s.peers {
		if p.Name == judge {
			return p.DB, true
		}
	}
	return nil, false
}

// pruneMail is one pass of the mail chore: delete this source's mail the
// judge has decided, then show what is left.
func (s *Sink) pruneMail(ctx context.Context, log *slog.Logger) error {
	db, ok := s.judgeDB()
	if !ok {
		return nil
	}
	judge := s.cfg.Mapping.Judge()
	jctx, cancel := context.WithTimeout(ctx, peerTimeout)
	var decided int64
	err := db.QueryRowContext(jctx, `SELECT value FROM cdc_sources_state WHERE name = ? AND kind = 'mail' AND id = 0 AND item = ?`,
		judge, s.cfg.Name).Scan(&decided)
	cancel()
	switch {
	case errors.Is(err, sql.ErrNoRows):
		decided = 0 // the judge has decided none of it yet
	case err != nil:
		if judge != s.cfg.Name {
			s.m.peerErrors.WithLabelValues(judge).Inc()
		}
		log.Warn("the judge's decisions could not be read; the mail waits for them", "judge", judge, "err", err)
		return s.countMail(ctx)
	}
	pruned := int64(0)
	for range mailPruneChunks {
		if decided == 0 {
			break
		}
		res, err := s.db.ExecContext(ctx, `DELETE FROM cdc_sources_mail WHERE name = ? AND seq <= ? ORDER BY seq LIMIT ?`,
			s.cfg.Name, decided, mailPruneChunk)
		if err != nil {
			return fmt.Errorf("prune the mail the judge decided: %w", err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return fmt.Errorf("prune the mail the judge decided: %w", err)
		}
		pruned += n
		if n < mailPruneChunk {
			break
		}
	}
	if pruned > 0 {
		log.Debug("mail the judge decided pruned", "rows", pruned, "up_to_seq", decided)
	}
	return s.countMail(ctx)
}

// countMail sets the gauge of this source's mail rows waiting.
func (s *Sink) countMail(ctx context.Context) error {
	var n int64
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM cdc_sources_mail WHERE name = ?`, s.cfg.Name).Scan(&n); err != nil {
		return fmt.Errorf("count the mail waiting: %w", err)
	}
	s.m.mailRows.Set(float64(n))
	return nil
}
