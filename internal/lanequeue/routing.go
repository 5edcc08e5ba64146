package lanequeue

// DefaultRoutes returns the built-in command-type routes: read-only tools go
// to "query", model calls to "generate", and tools with side effects to
// "execute". Types not listed go to Config.DefaultLane ("execute").
func DefaultRoutes() map[string]string {
	m := make(map[string]string, len(builtinRoutes))
	for k, v := range builtinRoutes {
		m[k] = v
	}
	return m
}

var builtinRoutes = map[string]string{
	"read":       laneQuery,
	"glob":       laneQuery,
	"ls":         laneQuery,
	"grep":       laneQuery,
	"list_files": laneQuery,
	"search":     laneQuery,
	"web_fetch":  laneQuery,
	"web_search": laneQuery,
	"bash":       laneExecute,
	"write":      laneExecute,
	"edit":       laneExecute,
	"delete":     laneExecute,
	"move":       laneExecute,
	"copy":       laneExecute,
	"execute":    laneExecute,
	"llm":        laneGenerate,
}

// buildRoutes resolves the route table for the configured lanes.
func buildRoutes(c Config, byName map[string]*lane) (map[string]*lane, *lane) {
	routes := make(map[string]*lane, len(builtinRoutes)+len(c.Routing))
	for typ, name := range builtinRoutes {
		if ln := byName[name]; ln != nil {
			routes[typ] = ln
		}
	}
	for typ, name := range c.Routing {
		routes[typ] = byName[name]
	}
	return routes, byName[c.defaultLane()]
}

// resolveLaneLocked picks the lane of a command: the named lane, else the
// route of its type, else the default lane.
func (q *Queue) resolveLaneLocked(name, typ string) (*lane, error) {
	if name != "" {
		if ln := q.byName[name]; ln != nil {
			return ln, nil
		}
		return nil, &laneError{name: name}
	}
	if ln := q.routes[typ]; ln != nil {
		return ln, nil
	}
	return q.defLane, nil
}

type laneError struct{ name string }

func (e *laneError) Error() string { return ErrUnknownLane.Error() + " " + quote(e.name) }
func (e *laneError) Unwrap() error { return ErrUnknownLane }

func quote(s string) string { return "\"" + s + "\"" }
