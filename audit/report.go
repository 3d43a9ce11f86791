package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people: the totals, then each kind
// found with its count and the findings it names, then the kinds found
// clean and those not checked (and why).
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "audit of %s at %s (evidence: %s), %s\n\n", r.Mapping, r.Position, r.Evidence, r.Took)
	b.WriteString("totals\n")
	tw := tabwriter.NewWriter(&b, 2, 4, 2, ' ', 0)
	t := r.Totals
	rows := []struct {
		name string
		n    *int64
	}{
		{"coupons issued", &t.Issued}, {"available", &t.Available}, {"used", &t.Used}, {"expired", &t.Expired},
		{"returned", &t.Returned}, {"released", &t.Released}, {"write-offs", t.WriteOffs},
		{"used with evidence", t.UsedWithEvidence}, {"used without evidence", t.UsedWithoutEvidence},
		{"issued minus write-offs", t.IssuedMinusWriteOffs},
	}
	for _, row := range rows {
		if row.n != nil {
			fmt.Fprintf(tw, "  %s\t%d\n", row.name, *row.n)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var clean, off []string
	for _, k := range r.Kinds {
		switch {
		case !k.Checked:
			off = append(off, fmt.Sprintf("  %s: %s\n", k.Kind, k.Off))
		case k.Count == 0:
			clean = append(clean, string(k.Kind))
		default:
			writeKind(&b, k)
		}
	}
	if r.Clean() {
		b.WriteString("\nnothing found\n")
	}
	if len(clean) > 0 {
		fmt.Fprintf(&b, "\nclean: %s\n", strings.Join(clean, ", "))
	}
	if len(off) > 0 {
		b.WriteString("\nnot checked\n" + strings.Join(off, ""))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeKind writes one kind found: its count and the findings named.
func writeKind(b *strings.Builder, k KindReport) {
	fmt.Fprintf(b, "\n%s: %d\n", k.Kind, k.Count)
	for _, f := range k.Examples {
		fmt.Fprintf(b, "  %s: %s%s\n", f.Subject(), f.Detail, f.about())
	}
	if more := k.Count - int64(len(k.Examples)); more > 0 {
		fmt.Fprintf(b, "  ... and %d more (-examples names more)\n", more)
	}
}

// about is the rest of what the finding names beyond its subject.
func (f Finding) about() string {
	var parts []string
	if f.Coupon != "" && f.Template != 0 {
		parts = append(parts, fmt.Sprintf("template %d", f.Template))
	}
	if f.Coupon != "" && f.User != "" {
		parts = append(parts, fmt.Sprintf("member %q", f.User))
	}
	if f.Orders != "" && !strings.Contains(f.Detail, f.Orders) {
		parts = append(parts, "orders "+f.Orders)
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
