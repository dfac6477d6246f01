package console

// Rendering: each page is the layout with the page's own template, run
// by html/template, which escapes every value for where it lands (text,
// attribute, URL), so a name holding markup shows as text.

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// pageNames are the templates beside layout.html, one per page.
var pageNames = []string{"login", "signedin", "notoken", "error", "overview", "endpoints", "keys", "usage", "requests", "config", "audit"}

// funcs are the helpers the templates format values with.
var funcs = template.FuncMap{
	"ms":      millis,
	"ms0":     millisOrZero,
	"pct":     percent,
	"num":     thousands,
	"usd":     func(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 4, 64) },
	"when":    func(t time.Time) string { return whenText(t) },
	"since":   func(t, now time.Time) string { return now.Sub(t).Round(time.Second).String() },
	"ratio":   func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) },
	"known":   func(v float64) bool { return v >= 0 },
	"over":    Over,
	"list":    func(v ...string) []string { return v },
	"safeURL": safeURL,
}

// safeURL is an endpoint's URL without any user and password it carries.
func safeURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(not a URL)"
	}
	u.User = nil
	return u.String()
}

func parsePages() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("console: %w", err)
		}
		pages[name] = t
	}
	return pages, nil
}

// pageData is what the layout reads; Data is the page's own.
type pageData struct {
	Page     string // the page's name: which link is the current one
	SignedIn bool
	CSRF     string // the session's CSRF token, for every form
	// ReadsAll reports whether the session reads everything (admin or
	// viewer), and so sees the endpoints and configuration pages; Writes
	// whether it may change anything (admin or tenant_admin).
	ReadsAll, Writes bool
	Who              string // the session's identity, as the header names it
	// Refresh is where the page sends the browser on at once; empty for
	// nowhere.
	Refresh string
	Live    bool // the page refreshes itself
	Now     time.Time
	Data    any
}

// errorPage is the error template's data.
type errorPage struct{ Message string }

// loginPage is the sign-in template's data.
type loginPage struct {
	Next   string
	Failed bool   // a wrong admin token was sent
	Token  bool   // the admin token signs in
	OIDC   string // the identity provider's sign-in link; empty for none
	// Message is why a sign-in at the provider failed; empty for none.
	Message string
}

// render writes page with status for ss (nil when not signed in).
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, ss *session, data any) {
	d := pageData{Page: page, Now: c.now().UTC(), Data: data, Live: page == "overview" || page == "endpoints"}
	if sp, ok := data.(signedInPage); ok {
		d.Refresh = sp.Next
	}
	if ss != nil {
		d.SignedIn, d.CSRF = true, ss.csrf
		d.ReadsAll, d.Writes, d.Who = ss.who.ReadsAll(), ss.who.Writes(), ss.who.Actor()
	}
	var b bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&b, "layout.html", d); err != nil {
		c.log.Error("console: rendering a page", "page", page, "err", err)
		http.Error(w, "The page could not be rendered.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

// failed renders the error page for a failure of the store or of llmgw
// itself: the cause to the log, a plain message to the page.
func (c *Console) failed(w http.ResponseWriter, r *http.Request, ss *session, what string, err error) {
	c.log.Error("console: "+what, "err", err)
	c.render(w, r, http.StatusInternalServerError, "error", ss, errorPage{Message: "Failed " + what + "; the gateway's log says why."})
}

// millis is d in milliseconds for a table cell; "–" for zero (unknown).
func millis(d time.Duration) string {
	if d <= 0 {
		return "–"
	}
	ms := float64(d) / float64(time.Millisecond)
	if ms < 10 {
		return strconv.FormatFloat(ms, 'f', 1, 64) + " ms"
	}
	return strconv.FormatFloat(math.Round(ms), 'f', 0, 64) + " ms"
}

// millisOrZero is millis, but a duration of zero is "0 ms": a cost
// learned to be none, not an unknown.
func millisOrZero(d time.Duration) string {
	if d <= 0 {
		return "0 ms"
	}
	if d < 100*time.Microsecond {
		return strconv.FormatFloat(float64(d)/float64(time.Millisecond), 'f', 2, 64) + " ms"
	}
	return millis(d)
}

// percent is a share, 0 to 1, as a percentage.
func percent(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" }

// thousands is n with commas between thousands.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b = append(b, ',')
		}
		b = append(b, s[i])
	}
	if neg {
		return "-" + string(b)
	}
	return string(b)
}

// whenText is t in UTC to the second; "never" for the zero time.
func whenText(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}
