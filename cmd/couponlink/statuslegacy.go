package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/couponlink/couponlink/canal"
	"github.com/couponlink/couponlink/inventory"
	"github.com/couponlink/couponlink/inventory/view"
)

// endNote says what status does with the coupons of an ended campaign.
const endNote = "counted as expired here: the campaign's end_time has passed, and the shop never writes EXPIRED"

// pastNote says why a template's AVAILABLE coupons are counted as expired:
// its campaign ended, or their own expires_at passed.
func pastNote(t view.Template) string {
	if t.Ended {
		return endNote
	}
	return "counted as expired here: their own expires_at has passed, and the shop never writes EXPIRED"
}

// printLegacyTemplates prints a legacy mapping's templates: the shop's
// row of each beside its counters; with sources (summed over several),
// each template's sources in a last column.
func printLegacyTemplates(stdout io.Writer, ts []view.Template, sources []string) error {
	if len(ts) == 0 {
		return nil
	}
	fmt.Fprintln(stdout)
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	head := "template\tname\tbudget\tremaining\tclaimable\theld\tused\texpired\treturned\treleased\tfrozen\tper-user limit\tend time"
	if sources != nil {
		head += "\tsources"
	}
	fmt.Fprintln(w, head)
	for i, t := range ts {
		name := t.Name
		if !t.Found {
			name = "(no row)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\t%s\t%s", t.ID, orDash(name), budgetText(t), remainingText(t.Remaining),
			claimableText(t), t.Held, t.Used, expiredText(t.Expired, t.PastEnd), t.Returned, t.Released, t.Frozen(),
			limitText(t.PerUserLimit), endText(t))
		if sources != nil {
			fmt.Fprintf(w, "\t%s", sources[i])
		}
		fmt.Fprintln(w)
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, t := range ts {
		if t.PastEnd > 0 {
			fmt.Fprintf(stdout, "template %d: its %d AVAILABLE coupons are %s\n", t.ID, t.PastEnd, pastNote(t))
		}
	}
	return nil
}

// printLegacyTemplate prints one legacy template, as a table or as the
// JSON of view.Template.
func printLegacyTemplate(ctx context.Context, db *sql.DB, m *canal.Mapping, id int64, asJSON bool, stdout io.Writer) error {
	t, err := inventory.NewQueries(m).ReadTemplate(ctx, db, id)
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdout, t)
	}
	return printTemplateView(stdout, t)
}

// printTemplateView prints a legacy template: its row, its counts and
// its channels.
func printTemplateView(stdout io.Writer, t view.Template) error {
	title := fmt.Sprintf("template %d", t.ID)
	if t.Name != "" {
		title += fmt.Sprintf(" %q", t.Name)
	}
	fmt.Fprintf(stdout, "%s (the shop's template row now; counts as of the cdc's checkpoint)\n\n", title)
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	if !t.Found {
		fmt.Fprintln(w, "row\tnone in the template table: no budget, nothing to judge over-issue against")
	}
	fmt.Fprintf(w, "budget\t%s\n", budgetText(t))
	fmt.Fprintf(w, "remaining\t%s (the shop's own stock column)\n", remainingText(t.Remaining))
	fmt.Fprintf(w, "claimable\t%s (budget - taken; 0 once the campaign has ended)\n", claimableText(t))
	fmt.Fprintf(w, "taken\t%d (held + used + frozen)\n", t.Taken())
	fmt.Fprintf(w, "per-user limit\t%s\n", limitText(t.PerUserLimit))
	end := endText(t)
	if t.PastEnd > 0 {
		end += fmt.Sprintf(": its %d AVAILABLE coupons are %s", t.PastEnd, pastNote(t))
	}
	fmt.Fprintf(w, "end time\t%s\n", end)
	w.Flush()
	fmt.Fprintln(stdout)
	w = tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(w, "channel\tquota\tclaimable\theld\tused\texpired\treturned\treleased\tfrozen")
	for _, c := range t.Channels {
		quota, claimable := "-", "-"
		if c.HasQuota {
			quota, claimable = fmt.Sprint(c.Quota), fmt.Sprint(c.Counts.Claimable())
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\t%s\t%d\t%d\t%d\n", c.Display(), quota, claimable, c.Held, c.Used,
			expiredText(c.Expired, c.PastEnd), c.Returned, c.Released, c.Frozen())
	}
	return w.Flush()
}

// printRecentAnomalies prints the latest anomalies, each coupon's change
// in couponlink's states with the source's codes: AVAILABLE(0) -> USED(1).
func printRecentAnomalies(stdout io.Writer, as []inventory.Anomaly) {
	if len(as) == 0 {
		return
	}
	fmt.Fprintln(stdout, "latest anomalies (newest first; all in cdc_anomaly)")
	w := tabwriter.NewWriter(stdout, 2, 4, 2, ' ', 0)
	for _, a := range as {
		var what []string
		if a.Coupon != 0 {
			what = append(what, fmt.Sprintf("coupon %d", a.Coupon))
		}
		if a.Template != 0 {
			what = append(what, fmt.Sprintf("template %d", a.Template))
		}
		say := a.Change()
		if say == "" {
			say = cut(a.Detail, 120)
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", a.At.UTC().Format(time.RFC3339), a.Kind, orDash(strings.Join(what, " ")), say)
	}
	w.Flush()
}

// expiredText is an expired count, saying how many of it are AVAILABLE
// coupons of an ended campaign.
func expiredText(expired, pastEnd int64) string {
	if pastEnd == 0 {
		return fmt.Sprint(expired)
	}
	return fmt.Sprintf("%d (%d by time)", expired, pastEnd)
}

func budgetText(t view.Template) string {
	switch {
	case t.Unlimited:
		return "unlimited"
	case !t.HasBudget:
		return "-"
	}
	return fmt.Sprint(t.Budget)
}

func claimableText(t view.Template) string {
	n, ok := t.Claimable()
	switch {
	case ok && t.OffShelf:
		return fmt.Sprintf("%d (off the shelf)", n)
	case ok:
		return fmt.Sprint(n)
	case t.Unlimited:
		return "unlimited"
	}
	return "-"
}

func remainingText(r *int64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprint(*r)
}

func limitText(n int64) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

func endText(t view.Template) string {
	if t.EndTime.IsZero() {
		return "-"
	}
	s := t.EndTime.Format(time.RFC3339)
	if t.Ended {
		s += " (ended)"
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// cut shortens s to n runes.
func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "..."
}
