package bench

// --plot: an SVG drawn by hand. A sweep plots TTFT, TPOT and inter-token
// percentiles and goodput against the offered rate; a single run plots
// the distributions (CDFs) of its latencies. PNG is refused: the plots
// need their axis labels, and drawing text into a raster without a font
// package is more than a bench should carry.

import (
	"bytes"
	"errors"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrPlotFormat is the error for a --plot file that is not .svg.
var ErrPlotFormat = errors.New("--plot writes SVG only: name a .svg file (PNG is not supported)")

// WritePlot draws out to path: against rate for a sweep, else CDFs of the
// single run's results.
func WritePlot(path string, out *Output, results []Result) error {
	if strings.ToLower(filepath.Ext(path)) != ".svg" {
		return fmt.Errorf("%w, got %q", ErrPlotFormat, filepath.Base(path))
	}
	var svg []byte
	if len(out.Runs) > 0 {
		svg = sweepPlot(out)
	} else {
		svg = cdfPlot(out, results)
	}
	if err := os.WriteFile(path, svg, 0o644); err != nil {
		return fmt.Errorf("plot: %w", err)
	}
	return nil
}

// series is one line of a panel.
type series struct {
	name  string
	color string
	x, y  []float64
}

// panel is one chart: axes, ticks, lines and a legend.
type panel struct {
	title, xLabel, yLabel string
	lines                 []series
	yMin, yMax            float64 // fixed y range when yMax > yMin
}

// Plot geometry, in SVG user units.
const (
	plotWidth   = 720
	panelHeight = 260
	marginLeft  = 70
	marginRight = 150 // room for the legend
	marginTop   = 36
	marginBot   = 44
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"}

func sweepPlot(out *Output) []byte {
	var xs, ttft50, ttft99, tpot99, itl99, good []float64
	xLabel := "offered rate (req/s)"
	if out.Trace != "" {
		xLabel = "time scale (arrivals ×)"
	}
	for _, r := range out.Runs {
		x := r.Rate
		if out.Trace != "" {
			x = r.TimeScale
		}
		xs = append(xs, x)
		ttft50 = append(ttft50, r.TTFTp50)
		ttft99 = append(ttft99, r.TTFTp99)
		tpot99 = append(tpot99, r.TPOTp99*1000)
		itl99 = append(itl99, r.ITLp99*1000)
		good = append(good, r.Goodput)
	}
	goodput := panel{title: "goodput (share meeting SLO)", xLabel: xLabel, yLabel: "share", yMin: 0, yMax: 1, lines: []series{
		{name: "goodput", x: xs, y: good}}}
	if c := out.Capacity; c != nil && len(xs) > 0 {
		goodput.lines = append(goodput.lines, series{name: fmt.Sprintf("%.0f%% target", capacityGoodput*100), color: "#999",
			x: []float64{slices.Min(xs), slices.Max(xs)}, y: []float64{capacityGoodput, capacityGoodput}})
		name := fmt.Sprintf("capacity %.3g", c.AtSLO)
		if c.LowerBound {
			name = "capacity ≥ " + name[len("capacity "):]
		}
		goodput.lines = append(goodput.lines, series{name: name, color: "#000", x: []float64{c.AtSLO, c.AtSLO}, y: []float64{0, 1}})
	}
	return render(plotTitle(out), []panel{
		{title: "time to first token", xLabel: xLabel, yLabel: "seconds", lines: []series{
			{name: "TTFT p50", x: xs, y: ttft50}, {name: "TTFT p99", x: xs, y: ttft99}}},
		{title: "time per output token", xLabel: xLabel, yLabel: "milliseconds", lines: []series{
			{name: "TPOT p99", x: xs, y: tpot99}, {name: "ITL p99", x: xs, y: itl99}}},
		goodput,
	})
}

func cdfPlot(out *Output, results []Result) []byte {
	var ttft, tpot, itl, e2e []float64
	for i := range results {
		r := &results[i]
		if r.Outcome != OutcomeOK {
			continue
		}
		e2e = append(e2e, r.E2E.Seconds())
		if r.Tokens > 0 {
			ttft = append(ttft, r.TTFT.Seconds())
		}
		if d, ok := r.TPOT(); ok {
			tpot = append(tpot, d.Seconds()*1000)
		}
		for _, g := range r.Gaps {
			itl = append(itl, float64(g)*1000)
		}
	}
	return render(plotTitle(out), []panel{
		{title: "latency CDF", xLabel: "seconds", yLabel: "share ≤ x", yMin: 0, yMax: 1, lines: []series{
			cdf("TTFT", ttft), cdf("end to end", e2e)}},
		{title: "per-token latency CDF", xLabel: "milliseconds", yLabel: "share ≤ x", yMin: 0, yMax: 1, lines: []series{
			cdf("TPOT", tpot), cdf("inter-token", itl)}},
	})
}

// plotTitle says what was run: the workload and its rate, or the trace and
// how it was scaled; the seed; and where it was sent.
func plotTitle(out *Output) string {
	var b strings.Builder
	b.WriteString("llmgw bench " + out.Workload)
	switch {
	case out.Trace != "":
		fmt.Fprintf(&b, " %s", filepath.Base(out.Trace))
		if out.TimeScale != 0 && out.TimeScale != 1 {
			fmt.Fprintf(&b, ", gaps ÷%g", out.TimeScale)
		}
		if out.LenScale != 0 && out.LenScale != 1 {
			fmt.Fprintf(&b, ", lengths ÷%g", out.LenScale)
		}
	case out.Rate > 0:
		fmt.Fprintf(&b, " at %g req/s", out.Rate)
	}
	fmt.Fprintf(&b, ", seed %d, %s", out.Seed, out.Target)
	if out.Direct {
		b.WriteString(" direct")
	}
	return b.String()
}

// maxCDFPoints bounds the points of one CDF line; more would only grow
// the file.
const maxCDFPoints = 400

// cdf is the empirical distribution of samples as a line.
func cdf(name string, samples []float64) series {
	slices.Sort(samples)
	s := series{name: name}
	n := len(samples)
	step := max(1, n/maxCDFPoints)
	for i := 0; i < n; i += step {
		s.x = append(s.x, samples[i])
		s.y = append(s.y, float64(i+1)/float64(n))
	}
	if n > 0 && s.y[len(s.y)-1] != 1 {
		s.x = append(s.x, samples[n-1])
		s.y = append(s.y, 1)
	}
	return s
}

// render lays panels out one under another.
func render(title string, panels []panel) []byte {
	height := 30 + len(panels)*panelHeight
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		plotWidth, height, plotWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="20" font-size="14" font-weight="bold">%s</text>`+"\n", marginLeft, html.EscapeString(title))
	for i, p := range panels {
		p.draw(&b, 30+i*panelHeight)
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}

func (p panel) draw(b *bytes.Buffer, top int) {
	x0, x1 := float64(marginLeft), float64(plotWidth-marginRight)
	y0, y1 := float64(top+panelHeight-marginBot), float64(top+marginTop)
	xmin, xmax := math.Inf(1), math.Inf(-1)
	ymin, ymax := math.Inf(1), math.Inf(-1)
	for _, s := range p.lines {
		for i := range s.x {
			xmin, xmax = min(xmin, s.x[i]), max(xmax, s.x[i])
			ymin, ymax = min(ymin, s.y[i]), max(ymax, s.y[i])
		}
	}
	if math.IsInf(xmin, 0) { // no data
		xmin, xmax, ymin, ymax = 0, 1, 0, 1
	}
	ymin = min(ymin, 0)
	if p.yMax > p.yMin {
		ymin, ymax = p.yMin, p.yMax
	}
	xmin = min(xmin, 0)
	xt, yt := ticks(xmin, xmax), ticks(ymin, ymax)
	xmin, xmax = xt[0], xt[len(xt)-1]
	ymin, ymax = yt[0], yt[len(yt)-1]
	sx := func(v float64) float64 { return x0 + (v-xmin)/(xmax-xmin)*(x1-x0) }
	sy := func(v float64) float64 { return y0 - (v-ymin)/(ymax-ymin)*(y0-y1) }

	fmt.Fprintf(b, `<text x="%.0f" y="%d" font-weight="bold">%s</text>`+"\n", x0, top+marginTop-10, html.EscapeString(p.title))
	for _, v := range xt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, sx(v), y0, sx(v), y1)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", sx(v), y0+16, tickLabel(v))
	}
	for _, v := range yt {
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`, x0, sy(v), x1, sy(v))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-6, sy(v)+4, tickLabel(v))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#444"/>`+"\n", x0, y1, x1-x0, y0-y1)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", (x0+x1)/2, y0+34, html.EscapeString(p.xLabel))
	fmt.Fprintf(b, `<text transform="translate(%.1f %.1f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", x0-50, (y0+y1)/2, html.EscapeString(p.yLabel))
	for i, s := range p.lines {
		color := s.color
		if color == "" {
			color = palette[i%len(palette)]
		}
		if len(s.x) > 0 {
			b.WriteString(`<polyline fill="none" stroke-width="2" stroke="` + color + `" points="`)
			for j := range s.x {
				fmt.Fprintf(b, "%.1f,%.1f ", sx(s.x[j]), sy(s.y[j]))
			}
			b.WriteString("\"/>\n")
			if len(s.x) <= 30 { // mark the points of a sweep
				for j := range s.x {
					fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`, sx(s.x[j]), sy(s.y[j]), color)
				}
				b.WriteString("\n")
			}
		}
		ly := y1 + 14 + float64(i)*18
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2"/>`, x1+12, ly-4, x1+32, ly-4, color)
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f">%s</text>`+"\n", x1+38, ly, html.EscapeString(s.name))
	}
}

// ticks are round values covering [lo, hi], about five of them.
func ticks(lo, hi float64) []float64 {
	if hi <= lo {
		hi = lo + 1
	}
	raw := (hi - lo) / 5
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	start := math.Floor(lo/step) * step
	var t []float64
	for v := start; ; v += step {
		t = append(t, v)
		if v >= hi-step*1e-9 {
			break
		}
	}
	if len(t) < 2 {
		t = append(t, start+step)
	}
	return t
}

func tickLabel(v float64) string {
	if math.Abs(v) < 1e-12 {
		return "0"
	}
	return fmt.Sprintf("%.4g", v)
}
