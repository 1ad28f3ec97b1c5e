package demotools

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tools holds what the handlers share; it is read-only after NewServer.
type tools struct {
	version string
	log     *slog.Logger
}

// gasBoxArgs are gas_box's arguments after go-sdk has validated them against
// gasBoxInputSchema and applied its defaults.
type gasBoxArgs struct {
	Element     int      `json:"element"`
	Count       int      `json:"count"`
	Density     float64  `json:"density"`
	Box         *float64 `json:"box"`
	MinDistance float64  `json:"minDistance"`
	Seed        uint64   `json:"seed"`
	DelayMs     int64    `json:"delayMs"`
}

// crystalArgs are crystal's arguments after validation and defaults.
type crystalArgs struct {
	Element int     `json:"element"`
	Lattice string  `json:"lattice"`
	A       float64 `json:"a"`
	Repeats []int   `json:"repeats"`
}

// progressSteps is how many progress notifications gas_box sends.
const progressSteps = 10

// maxTries bounds the draws for one atom when a minimum distance is set.
const maxTries = 1000

// pcgStream is the second PCG word; the seed argument is the first.
const pcgStream = 0x6d6567616e65 // "megane"

// gasBox places Count atoms uniformly at random in a cubic periodic box.
func (t *tools) gasBox(ctx context.Context, req *mcp.CallToolRequest, in gasBoxArgs) (*mcp.CallToolResult, any, error) {
	if in.Element < 1 || in.Element > 118 || in.Count < 1 || in.Count > maxAtoms {
		return toolError("element must be 1 to 118 and count 1 to 500000."), nil, nil
	}
	sym := symbol(in.Element)
	var length float64
	if in.Box != nil {
		length = *in.Box
	} else {
		if in.Density <= 0 {
			return toolError("Density must be greater than 0 g/cm³, or give a box length."), nil, nil
		}
		grams := float64(in.Count) * elementMasses[in.Element-1] / avogadro
		volume := grams / in.Density * 1e24 // cm³ to Å³
		length = math.Cbrt(volume)
	}
	if !(length > 0) || math.IsInf(length, 0) || length > 1e6 {
		return toolError(fmt.Sprintf("The box length %.4g Å is unusable; choose a density or box length that gives a box between 0 and 10⁶ Å.", length)), nil, nil
	}
	d := in.MinDistance
	if d > 0 {
		// Random sequential addition jams near a packing fraction of 0.38;
		// refuse well before that rather than spin.
		fraction := float64(in.Count) * math.Pi / 6 * d * d * d / (length * length * length)
		if fraction > 0.3 {
			return toolError(fmt.Sprintf("%d atoms %g Å apart do not fit in a %.4g Å box; lower the count or the minimum distance, or enlarge the box (lower the density).", in.Count, d, length)), nil, nil
		}
	}

	token := req.Params.GetProgressToken()
	rng := rand.New(rand.NewPCG(in.Seed, pcgStream))
	pos := make([]float64, 0, 3*in.Count)
	var grid *cellGrid
	if d > 0 {
		grid = newCellGrid(length, d, in.Count)
	}
	stepDelay := time.Duration(in.DelayMs) * time.Millisecond / progressSteps
	next := 1 // the next progress step to report
	for i := 0; i < in.Count; i++ {
		if i%4096 == 0 && ctx.Err() != nil {
			return t.cancelled("gas_box", i)
		}
		placed := false
		for try := 0; try < maxTries; try++ {
			x, y, z := rng.Float64()*length, rng.Float64()*length, rng.Float64()*length
			if grid == nil || grid.free(pos, x, y, z) {
				pos = append(pos, x, y, z)
				if grid != nil {
					grid.add(i, x, y, z)
				}
				placed = true
				break
			}
		}
		if !placed {
			return toolError(fmt.Sprintf("Could not place atom %d of %d at least %g Å from the others after %d tries; lower the count or the minimum distance, or enlarge the box.", i+1, in.Count, d, maxTries)), nil, nil
		}
		for next <= progressSteps && i+1 >= next*in.Count/progressSteps {
			if token != nil {
				// A failed notification means the session is going away; the
				// next ctx check ends the call.
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: token,
					Progress:      float64(i + 1),
					Total:         float64(in.Count),
					Message:       fmt.Sprintf("placed %d of %d atoms", i+1, in.Count),
				})
			}
			if err := sleepCtx(ctx, stepDelay); err != nil {
				return t.cancelled("gas_box", i+1)
			}
			next++
		}
	}
	if ctx.Err() != nil {
		return t.cancelled("gas_box", in.Count)
	}
	elements := make([]int, in.Count)
	for i := range elements {
		elements[i] = in.Element
	}
	prov := map[string]any{ServerName: t.version, "seed": in.Seed}
	name := sym + "-gas"
	cell := []float64{length, 0, 0, 0, length, 0, 0, 0, length}
	summary := fmt.Sprintf("Placed %d %s atoms at random in a periodic %.4g Å cubic box (%d atoms).", in.Count, sym, length, in.Count)
	t.log.Info("call done", "tool", "gas_box", "outcome", "ok", "atoms", in.Count)
	return builderResult(name, elements, pos, cell, nil, prov, summary), nil, nil
}

// crystal builds a cubic supercell.
func (t *tools) crystal(ctx context.Context, req *mcp.CallToolRequest, in crystalArgs) (*mcp.CallToolResult, any, error) {
	if in.Element < 1 || in.Element > 118 {
		return toolError("element must be an atomic number from 1 to 118."), nil, nil
	}
	var basis [][3]float64
	switch in.Lattice {
	case "sc":
		basis = [][3]float64{{0, 0, 0}}
	case "bcc":
		basis = [][3]float64{{0, 0, 0}, {0.5, 0.5, 0.5}}
	case "fcc":
		basis = [][3]float64{{0, 0, 0}, {0, 0.5, 0.5}, {0.5, 0, 0.5}, {0.5, 0.5, 0}}
	default:
		return toolError(fmt.Sprintf("Unknown lattice %q; choose sc, bcc or fcc.", in.Lattice)), nil, nil
	}
	if len(in.Repeats) != 3 {
		return toolError("repeats must be three integers [nx, ny, nz]."), nil, nil
	}
	nx, ny, nz := in.Repeats[0], in.Repeats[1], in.Repeats[2]
	if nx < 1 || ny < 1 || nz < 1 || !(in.A > 0) {
		return toolError("The lattice constant must be positive and every repeat at least 1."), nil, nil
	}
	n := int64(len(basis)) * int64(nx) * int64(ny) * int64(nz)
	if n > maxAtoms {
		return toolError(fmt.Sprintf("A %d×%d×%d %s supercell has %d atoms, more than the 500000 Builder accepts; use fewer repeats.", nx, ny, nz, in.Lattice, n)), nil, nil
	}
	pos := make([]float64, 0, 3*n)
	for i := 0; i < nx; i++ {
		if ctx.Err() != nil {
			return t.cancelled("crystal", len(pos)/3)
		}
		for j := 0; j < ny; j++ {
			for k := 0; k < nz; k++ {
				for _, b := range basis {
					pos = append(pos, (float64(i)+b[0])*in.A, (float64(j)+b[1])*in.A, (float64(k)+b[2])*in.A)
				}
			}
		}
	}
	elements := make([]int, n)
	for i := range elements {
		elements[i] = in.Element
	}
	sym := symbol(in.Element)
	cell := []float64{float64(nx) * in.A, 0, 0, 0, float64(ny) * in.A, 0, 0, 0, float64(nz) * in.A}
	name := fmt.Sprintf("%s-%s-%dx%dx%d", sym, in.Lattice, nx, ny, nz)
	summary := fmt.Sprintf("Built a %d×%d×%d %s %s supercell with a = %g Å (%d atoms).", nx, ny, nz, in.Lattice, sym, in.A, n)
	t.log.Info("call done", "tool", "crystal", "outcome", "ok", "atoms", n)
	return builderResult(name, elements, pos, cell, nil, map[string]any{ServerName: t.version}, summary), nil, nil
}

// cancelled logs a call stopped by cancellation and returns its error; the
// client has stopped waiting, so the result content does not matter.
func (t *tools) cancelled(tool string, done int) (*mcp.CallToolResult, any, error) {
	t.log.Info("call cancelled", "tool", tool, "outcome", "cancelled", "atoms", done)
	return nil, nil, context.Canceled
}

// sleepCtx waits for d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// toolError is a §6 tool error: isError with one actionable line.
func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// builderResult writes the BuilderResult JSON once, directly from the
// arrays (a 500000-atom result is tens of megabytes), and wraps it with the
// one-sentence summary. bonds is nil for an atomic structure.
func builderResult(name string, elements []int, pos, cell []float64, bonds [][2]int, prov map[string]any, summary string) *mcp.CallToolResult {
	b := make([]byte, 0, 64+len(elements)*4+len(pos)*20)
	b = append(b, `{"contract":1,"name":`...)
	b = strconv.AppendQuote(b, name) // name is ASCII here, so Go quoting is valid JSON
	b = append(b, `,"structure":{"elements":[`...)
	for i, z := range elements {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(z), 10)
	}
	b = append(b, `],"positions":`...)
	b = appendFloats(b, pos)
	b = append(b, `,"cell":`...)
	if cell == nil {
		b = append(b, "null"...)
	} else {
		b = appendFloats(b, cell)
	}
	b = append(b, `,"bonds":[`...)
	for i, p := range bonds {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '[')
		b = strconv.AppendInt(b, int64(p[0]), 10)
		b = append(b, ',')
		b = strconv.AppendInt(b, int64(p[1]), 10)
		b = append(b, ']')
	}
	b = append(b, `]},"warnings":[],"provenance":`...)
	pj, err := json.Marshal(prov)
	if err != nil { // a map of strings and numbers always marshals
		panic(err)
	}
	b = append(b, pj...)
	b = append(b, '}')
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: summary}},
		StructuredContent: json.RawMessage(b),
	}
}

// appendFloats appends xs as a JSON array of numbers (shortest exact form).
func appendFloats(b []byte, xs []float64) []byte {
	b = append(b, '[')
	for i, x := range xs {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, x, 'g', -1, 64)
	}
	return append(b, ']')
}

// cellGrid is a periodic cell list for the minimum-distance check: cells at
// least d wide, so that any atom closer than d lies in one of the 27 cells
// around a point.
type cellGrid struct {
	m      int     // cells per side
	width  float64 // cell width, L/m
	length float64 // box length L
	d2     float64 // squared minimum distance
	head   []int32 // first atom in each cell, -1 when empty
	next   []int32 // next atom in the same cell, -1 at the end
}

func newCellGrid(length, d float64, n int) *cellGrid {
	m := int(length / d)
	m = max(1, min(m, 128)) // 128³ cells is enough for 500000 atoms
	g := &cellGrid{m: m, width: length / float64(m), length: length, d2: d * d,
		head: make([]int32, m*m*m), next: make([]int32, n)}
	for i := range g.head {
		g.head[i] = -1
	}
	return g
}

func (g *cellGrid) index(x float64) int {
	i := int(x / g.width)
	return min(max(i, 0), g.m-1)
}

func (g *cellGrid) add(atom int, x, y, z float64) {
	c := (g.index(x)*g.m+g.index(y))*g.m + g.index(z)
	g.next[atom] = g.head[c]
	g.head[c] = int32(atom)
}

// free reports whether (x, y, z) is at least d from every atom in pos,
// using the minimum-image convention.
func (g *cellGrid) free(pos []float64, x, y, z float64) bool {
	ix, iy, iz := g.index(x), g.index(y), g.index(z)
	// With fewer than 3 cells per side the 27 neighbours repeat; visit each
	// distinct cell once.
	var seen [27]int
	ns := 0
	for dx := -1; dx <= 1; dx++ {
		for dy := -1; dy <= 1; dy++ {
			for dz := -1; dz <= 1; dz++ {
				c := (mod(ix+dx, g.m)*g.m+mod(iy+dy, g.m))*g.m + mod(iz+dz, g.m)
				dup := false
				for _, s := range seen[:ns] {
					if s == c {
						dup = true
						break
					}
				}
				if dup {
					continue
				}
				seen[ns] = c
				ns++
				for a := g.head[c]; a >= 0; a = g.next[a] {
					ddx := minImage(pos[3*a]-x, g.length)
					ddy := minImage(pos[3*a+1]-y, g.length)
					ddz := minImage(pos[3*a+2]-z, g.length)
					if ddx*ddx+ddy*ddy+ddz*ddz < g.d2 {
						return false
					}
				}
			}
		}
	}
	return true
}

func mod(a, m int) int { return ((a % m) + m) % m }

func minImage(d, l float64) float64 { return d - l*math.Round(d/l) }
