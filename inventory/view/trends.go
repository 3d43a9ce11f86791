package view

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/couponlink/couponlink/api"
	"github.com/couponlink/couponlink/coupon"
	"github.com/couponlink/couponlink/internal/sqltx"
)

// MaxTrendHours is the longest window of Trends.
const MaxTrendHours = 24

// trendSeries are the ledger's time-stamped rows a trend counts, each
// read by a range of its (template, [kind,] time, channel) index
// (migration 0016): the window's rows only, from the index alone.
var trendSeries = []struct {
	name   string
	series func(*api.ChannelTrend) []int64
	query  string
}{
	{"claims", func(c *api.ChannelTrend) []int64 { return c.Claims }, `SELECT channel, TIMESTAMPDIFF(SECOND, ?, claimed_at) DIV 60 AS m, COUNT(*) FROM user_coupon
		WHERE template_id = ? AND claimed_at >= ? AND claimed_at < ? GROUP BY channel, m ORDER BY NULL`},
	{"redemptions", func(c *api.ChannelTrend) []int64 { return c.Redemptions }, `SELECT channel, TIMESTAMPDIFF(SECOND, ?, redeemed_at) DIV 60 AS m, COUNT(*) FROM redemption_log
		WHERE template_id = ? AND redeemed_at >= ? AND redeemed_at < ? GROUP BY channel, m ORDER BY NULL`},
	{"releases", func(c *api.ChannelTrend) []int64 { return c.Releases }, `SELECT channel, TIMESTAMPDIFF(SECOND, ?, created_at) DIV 60 AS m, COUNT(*) FROM inventory_flow
		WHERE template_id = ? AND kind = 'release' AND created_at >= ? AND created_at < ? GROUP BY channel, m ORDER BY NULL`},
}

// TrendQueries are the SQL of Trends, by series, for the tests' EXPLAIN.
func TrendQueries() map[string]string {
	out := map[string]string{}
	for _, s := range trendSeries {
		out[s.name] = s.query
	}
	return out
}

// Trends counts a template's claims, redemptions and releases per minute
// and channel over the hours up to now (the current minute is the last),
// in one snapshot. A template without channels is coupon.NotFound.
func Trends(ctx context.Context, db *sql.DB, templateID int64, hours int, now time.Time) (api.Trends, error) {
	to := now.UTC().Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-time.Duration(hours) * time.Hour)
	minutes := hours * 60
	var out api.Trends
	err := sqltx.Run(ctx, db, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, func(tx *sql.Tx) error {
		out = api.Trends{Template: templateID, Hours: hours, From: from, To: to, Channels: []api.ChannelTrend{}}
		rows, err := tx.QueryContext(ctx, `SELECT channel FROM channel_quota WHERE template_id = ? ORDER BY channel`, templateID)
		if err != nil {
			return err
		}
		byName := map[string]*api.ChannelTrend{}
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				rows.Close()
				return err
			}
			out.Channels = append(out.Channels, api.ChannelTrend{Channel: name,
				Claims: make([]int64, minutes), Redemptions: make([]int64, minutes), Releases: make([]int64, minutes)})
		}
		if err := rows.Close(); err != nil {
			return err
		}
		if len(out.Channels) == 0 {
			return coupon.NotFound("template", templateID)
		}
		for i := range out.Channels {
			byName[out.Channels[i].Channel] = &out.Channels[i]
		}
		for _, s := range trendSeries {
			if err := countPerMinute(ctx, tx, s.query, templateID, from, to, func(channel string, m int, n int64) {
				c := byName[channel]
				if c == nil || m < 0 || m >= minutes {
					return // a channel no longer in channel_quota
				}
				s.series(c)[m] = n
			}); err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
		}
		return nil
	})
	if err != nil {
		return api.Trends{}, fmt.Errorf("read trends: %w", err)
	}
	return out, nil
}

func countPerMinute(ctx context.Context, tx *sql.Tx, query string, templateID int64, from, to time.Time, add func(string, int, int64)) error {
	rows, err := tx.QueryContext(ctx, query, from, templateID, from, to)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var channel string
		var m int
		var n int64
		if err := rows.Scan(&channel, &m, &n); err != nil {
			return err
		}
		add(channel, m, n)
	}
	return rows.Err()
}
