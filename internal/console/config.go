package console

// The Config page: the catalog in service, and the last reload.

import (
	"net/http"

	"gitea.mynodes.xyz/ilker/llmgw/internal/control/catalog"
)

// configPage is the Config template's data.
type configPage struct {
	Catalog *catalog.Catalog // nil before the first
	Reload  Reload
}

func (c *Console) config(w http.ResponseWriter, r *http.Request, ss *session) {
	c.render(w, r, http.StatusOK, "config", ss, configPage{Catalog: c.gw.Catalog(), Reload: c.gw.LastReload()})
}
