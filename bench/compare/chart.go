package main

import (
	"fmt"
	"math"
	"strings"
)

// The chart: two panels side by side, each on a log scale. Left, publish
// p50 against history per contender (lines); right, throughput against
// writers (grouped bars).
const (
	panelW, panelH = 460, 330
	marginL        = 64
	marginR        = 16
	marginT        = 34
	marginB        = 58
	legendH        = 28
)

var contenderColors = map[string]string{
	idBucketops:  "#1b6ac9",
	idGitClone:   "#c62828",
	idGitQueue:   "#ef6c00",
	idGitWorkdir: "#6d6d6d",
}

type series struct {
	id     string
	values []float64 // one per x label; 0 or less is not drawn
}

type panel struct {
	title, unit string
	labels      []string
	series      []series
	bars        bool
}

// renderChart returns the SVG of the run's history and concurrency figures.
func renderChart(r *Results) []byte {
	var panels []panel
	if len(r.History) > 0 {
		p := panel{title: "Publish p50 against history", unit: "ms"}
		for _, row := range r.History {
			p.labels = append(p.labels, fmtInt(row.History))
		}
		for _, id := range r.Contenders {
			s := series{id: id}
			for _, row := range r.History {
				s.values = append(s.values, float64(percentile(row.By[id].Latencies, 50))/1e6)
			}
			p.series = append(p.series, s)
		}
		panels = append(panels, p)
	}
	if len(r.Concurrency) > 0 {
		p := panel{title: "Throughput against concurrent writers", unit: "publishes/s", bars: true}
		for _, row := range r.Concurrency {
			label := fmt.Sprint(row.Writers)
			if row.SameApp {
				label += ", one app"
			}
			p.labels = append(p.labels, label)
		}
		for _, id := range r.Contenders {
			s := series{id: id}
			for _, row := range r.Concurrency {
				s.values = append(s.values, row.By[id].Throughput())
			}
			p.series = append(p.series, s)
		}
		panels = append(panels, p)
	}
	w, h := max(len(panels), 1)*panelW, panelH+legendH
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", w, h)
	for i, p := range panels {
		p.draw(&b, float64(i*panelW))
	}
	x := 12.0
	for _, id := range r.Contenders {
		fmt.Fprintf(&b, `<rect x="%.0f" y="%d" width="12" height="12" fill="%s"/>`, x, panelH+6, contenderColors[id])
		fmt.Fprintf(&b, `<text x="%.0f" y="%d">%s</text>`+"\n", x+16, panelH+16, xmlText(contenderNames[id]))
		x += 28 + 6.2*float64(len(contenderNames[id]))
	}
	fmt.Fprintf(&b, "</svg>\n")
	return []byte(b.String())
}

func (p panel) draw(b *strings.Builder, x0 float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range p.series {
		for _, v := range s.values {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		lo, hi = 1, 10
	}
	dlo, dhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if dhi == dlo {
		dhi++
	}
	left, top := x0+marginL, float64(marginT)
	pw, ph := float64(panelW-marginL-marginR), float64(panelH-marginT-marginB)
	y := func(v float64) float64 { return top + ph - (math.Log10(v)-dlo)/(dhi-dlo)*ph }
	slot := pw / float64(max(len(p.labels), 1))
	fmt.Fprintf(b, `<text x="%.0f" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", left, xmlText(p.title))
	for d := dlo; d <= dhi; d++ {
		v := math.Pow(10, d)
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`, left, y(v), left+pw, y(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, xmlText(fmtTick(v)))
	}
	fmt.Fprintf(b, `<text transform="translate(%.0f %.0f) rotate(-90)" text-anchor="middle">%s (log scale)</text>`+"\n", x0+14, top+ph/2, xmlText(p.unit))
	fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333333"/>`+"\n", left, top+ph, left+pw, top+ph)
	for i, l := range p.labels {
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+slot*(float64(i)+0.5), top+ph+18, xmlText(l))
	}
	xTitle := "prior releases (generations, commits)"
	if p.bars {
		xTitle = "concurrent writers (distinct apps unless noted)"
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", left+pw/2, top+ph+40, xTitle)
	bw := slot * 0.8 / float64(max(len(p.series), 1))
	for si, s := range p.series {
		color := contenderColors[s.id]
		var points []string
		for i, v := range s.values {
			if v <= 0 {
				continue
			}
			if p.bars {
				bx := left + slot*float64(i) + slot*0.1 + bw*float64(si)
				by := y(v)
				fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`+"\n",
					bx, by, bw-1, top+ph-by, color, xmlText(contenderNames[s.id]), fmtRate(v))
				continue
			}
			cx := left + slot*(float64(i)+0.5)
			points = append(points, fmt.Sprintf("%.1f,%.1f", cx, y(v)))
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s: %.2f ms</title></circle>`+"\n", cx, y(v), color, xmlText(contenderNames[s.id]), v)
		}
		if len(points) > 1 {
			fmt.Fprintf(b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(points, " "), color)
		}
	}
}

func fmtTick(v float64) string {
	if v < 1 {
		return fmt.Sprintf("%g", v)
	}
	return fmtInt(int(v + 0.5))
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlText(s string) string { return xmlEscaper.Replace(s) }
