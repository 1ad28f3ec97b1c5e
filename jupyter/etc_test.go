package jupyter

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// TestEtcFiles checks that the files in etc/ are what the code reads and
// writes.
func TestEtcFiles(t *testing.T) {
	data, err := os.ReadFile("../etc/jupyter-server-proxy.json")
	must(t, err)
	var reg struct {
		ServerProxy struct {
			Servers map[string]ProxyRegistration `json:"servers"`
		}
	}
	must(t, json.Unmarshal(data, &reg))
	if !reflect.DeepEqual(reg.ServerProxy.Servers, map[string]ProxyRegistration{ProxyServerName: Registration("/usr/local/bin/megane-jupyter-bridge", "", false)}) {
		t.Errorf("etc/jupyter-server-proxy.json differs from Registration: %+v", reg)
	}

	s := newSandbox(t)
	s.write("home/.jupyter/jupyter_server_config.json", string(mustRead(t, "../etc/mcp_servers.example.json")))
	cfg, err := Load(t.Context(), noPython(s))
	must(t, err)
	if len(cfg.Problems) != 0 || len(cfg.Servers) != 3 {
		t.Errorf("example config: %d entries, problems:\n%s", len(cfg.Servers), problemsText(cfg.Problems))
	}

	af, probs := parseAdmin("example.toml", string(mustRead(t, "../etc/megane_jupyter_bridge.example.toml")))
	if af == nil || len(probs) != 0 || len(af.servers) != 1 {
		t.Errorf("example TOML: %v", probs)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	must(t, err)
	return b
}
