package fleet

import (
	"fmt"
	"html"
	"os"
	"strings"
	"time"
)

var feedColors = map[string]string{Git: "#c62828", GitPaths: "#ef6c00", Bucket: "#1b6ac9"}

// bar is one horizontal bar of a chart row.
type bar struct {
	label string
	value time.Duration
	color string
}

// Chart returns an SVG of the race: per feed, the median burst's time to
// every app live, and the stream's p50 and p99, as horizontal bars on a
// linear scale of seconds, one panel each.
func Chart(r Report) []byte {
	var panels [][]bar
	var titles []string
	var burst []bar
	for _, f := range r.Feeds {
		if len(f.Bursts) > 0 {
			burst = append(burst, bar{f.Name, f.MedianBurst().Live, feedColors[f.Name]})
		}
	}
	if len(burst) > 0 {
		panels, titles = append(panels, burst), append(titles, fmt.Sprintf("Burst: %d apps released, until every app is Synced (median)", r.Apps))
	}
	var stream []bar
	for _, f := range r.Feeds {
		if s := f.Stream; s != nil && len(s.Latencies) > 0 {
			stream = append(stream,
				bar{f.Name + " p50", Percentile(s.Latencies, 50), feedColors[f.Name]},
				bar{f.Name + " p99", Percentile(s.Latencies, 99), feedColors[f.Name]})
		}
	}
	if len(stream) > 0 {
		panels, titles = append(panels, stream), append(titles, "Stream: one release a second, publish to Synced")
	}
	const width, labelW, rowH, titleH, gap = 860, 300, 26, 30, 18
	height := gap
	for _, p := range panels {
		height += titleH + rowH*len(p) + gap
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="13">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	y := gap
	for i, p := range panels {
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s</text>`+"\n", y+18, html.EscapeString(titles[i]))
		y += titleH
		longest := time.Duration(0)
		for _, br := range p {
			longest = max(longest, br.value)
		}
		scale := float64(width-labelW-90) / max(float64(longest), 1)
		for _, br := range p {
			w := float64(br.value) * scale
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+17, html.EscapeString(br.label))
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW, y+4, w, rowH-8, br.color)
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(labelW)+w+6, y+17, fmtDur(br.value))
			y += rowH
		}
		y += gap
	}
	b.WriteString("</svg>\n")
	return []byte(b.String())
}

func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
