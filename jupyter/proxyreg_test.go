package jupyter

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestInstallUninstallRoundTrip installs into files of many shapes and
// checks that install is idempotent, keeps every other key, and that
// uninstall restores the exact bytes.
func TestInstallUninstallRoundTrip(t *testing.T) {
	const bin = "/opt/bridge/megane-jupyter-bridge"
	befores := map[string]string{
		"missing":  "",
		"jupyter":  "{\n  \"ServerApp\": {\n    \"jpserver_extensions\": {\n      \"x\": true\n    }\n  }\n}\n",
		"one line": `{"ServerApp": {"ip": "127.0.0.1"}, "A": [1, {"b": null}]}`,
		"tabs":     "{\n\t\"ServerApp\": {\"port\": 8888}\n}",
		"other proxy servers": `{
    "ServerProxy": {
        "servers": {
            "code": {"command": ["code-server", "--port={port}"]}
        },
        "host_allowlist": ["localhost"]
    },
    "Z": "\"}{,"
}
`,
		"empty proxy parents kept": `{"ServerProxy": {"servers": {"x": {}}, "other": 1}}`,
	}
	for name, before := range befores {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "sub", "jupyter_server_config.json")
			if name != "missing" {
				must(t, os.MkdirAll(filepath.Dir(path), 0o755))
				must(t, os.WriteFile(path, []byte(before), 0o600))
			}
			changed, err := InstallRegistration(path, bin, "", false)
			if err != nil || !changed {
				t.Fatalf("install: changed %v err %v", changed, err)
			}
			after, _ := os.ReadFile(path)
			var doc map[string]any
			if err := json.Unmarshal(after, &doc); err != nil {
				t.Fatalf("install wrote invalid JSON: %v\n%s", err, after)
			}
			got, _ := json.Marshal(doc["ServerProxy"].(map[string]any)["servers"].(map[string]any)["megane"])
			var reg ProxyRegistration
			must(t, json.Unmarshal(got, &reg))
			if !reflect.DeepEqual(reg, Registration(bin, "", false)) || !IsBridgeRegistration(got) {
				t.Errorf("registration %s, want %+v", got, Registration(bin, "", false))
			}
			if name != "missing" {
				var old map[string]any
				must(t, json.Unmarshal([]byte(before), &old))
				for k, v := range old {
					if k != "ServerProxy" && !reflect.DeepEqual(doc[k], v) {
						t.Errorf("key %s changed", k)
					}
				}
				if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
					t.Errorf("mode %v, want 0600 kept", fi.Mode().Perm())
				}
			}
			if changed, err := InstallRegistration(path, bin, "", false); err != nil || changed {
				t.Errorf("second install: changed %v err %v", changed, err)
			}
			if again, _ := os.ReadFile(path); string(again) != string(after) {
				t.Error("second install changed the file")
			}
			if changed, err := UninstallRegistration(path); err != nil || !changed {
				t.Fatalf("uninstall: changed %v err %v", changed, err)
			}
			restored, err := os.ReadFile(path)
			if name == "missing" {
				if !os.IsNotExist(err) {
					t.Errorf("the file install created is still there: %q", restored)
				}
				return
			}
			if string(restored) != before {
				t.Errorf("uninstall did not restore the file:\n got %q\nwant %q", restored, before)
			}
			if changed, err := UninstallRegistration(path); err != nil || changed {
				t.Errorf("second uninstall: changed %v err %v", changed, err)
			}
			left, _ := os.ReadDir(filepath.Dir(path))
			if len(left) != 1 {
				t.Errorf("temporary files left behind: %v", left)
			}
		})
	}
}

func TestInstallUpdatesOldBinaryAndRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "jupyter_server_config.json")
	if _, err := InstallRegistration(path, "/old/megane-jupyter-bridge", "", false); err != nil {
		t.Fatal(err)
	}
	if changed, err := InstallRegistration(path, "/new/megane-jupyter-bridge", "", false); err != nil || !changed {
		t.Fatalf("update: %v %v", changed, err)
	}
	data, _ := os.ReadFile(path)
	if !strings.Contains(string(data), "/new/megane-jupyter-bridge") || strings.Contains(string(data), "/old/") {
		t.Errorf("not updated:\n%s", data)
	}
	for _, bad := range []string{`{"a": `, `[1]`, `{"ServerProxy": 3}`, `{"ServerProxy": {"servers": []}}`} {
		must(t, os.WriteFile(path, []byte(bad), 0o644))
		_, err := InstallRegistration(path, "/b", "", false)
		if err == nil || !strings.Contains(err.Error(), "refusing to change "+path) {
			t.Errorf("%s: err %v", bad, err)
		}
		if now, _ := os.ReadFile(path); string(now) != bad {
			t.Errorf("%s: the file was changed", bad)
		}
	}
	must(t, os.WriteFile(path, []byte(`{"ServerProxy": {"servers": {"megane": {"command": ["other"]}}}}`), 0o644))
	if _, err := UninstallRegistration(path); err == nil || !strings.Contains(err.Error(), "not the registration install writes") {
		t.Errorf("uninstall of a foreign entry: %v", err)
	}
}

// TestInstalledRegistrationSeenByRealServer checks that a real Jupyter
// server started after install has ServerProxy.servers.megane in its
// effective configuration.
func TestInstalledRegistrationSeenByRealServer(t *testing.T) {
	py := needJupyter(t)
	s := newSandbox(t)
	s.vars["JUPYTER_CONFIG_DIR"] = filepath.Join(s.dir, "cfg")
	s.write("cfg/jupyter_server_config.json", "{\n  \"ServerApp\": {\n    \"open_browser\": false\n  }\n}\n")
	path, err := InstallFile(t.Context(), InstallUser, s.opts())
	must(t, err)
	if path != filepath.Join(s.dir, "cfg", "jupyter_server_config.json") {
		t.Fatalf("user install file %s", path)
	}
	if _, err := InstallRegistration(path, "/usr/bin/megane-jupyter-bridge", "", false); err != nil {
		t.Fatal(err)
	}
	cfg := showConfig(t, py, s)
	var servers map[string]ProxyRegistration
	must(t, json.Unmarshal(cfg["ServerProxy"]["servers"], &servers))
	if !reflect.DeepEqual(servers["megane"], Registration("/usr/bin/megane-jupyter-bridge", "", false)) {
		t.Errorf("effective ServerProxy.servers = %+v", servers)
	}
	ours, err := Load(t.Context(), s.opts())
	must(t, err)
	if !IsBridgeRegistration(ours.ServerProxy.Servers["megane"]) {
		t.Errorf("Load's ServerProxy = %+v", ours.ServerProxy)
	}
}

// TestInstallWithJupyterURL: under JupyterHub internal SSL the admin gives
// install the Hub's address of the user's server; the registration passes
// it to serve, is recognised as install's own (so uninstall removes it),
// and is replaced when install runs again without it.
func TestInstallWithJupyterURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jupyter_server_config.json")
	const bin, hub = "/usr/bin/megane-jupyter-bridge", "https://hub.example.org{base_url}"
	if changed, err := InstallRegistration(path, bin, hub, false); err != nil || !changed {
		t.Fatalf("install: %v %v", changed, err)
	}
	var doc struct {
		ServerProxy struct {
			Servers map[string]json.RawMessage `json:"servers"`
		} `json:"ServerProxy"`
	}
	data, _ := os.ReadFile(path)
	must(t, json.Unmarshal(data, &doc))
	raw := doc.ServerProxy.Servers["megane"]
	var reg ProxyRegistration
	must(t, json.Unmarshal(raw, &reg))
	want := []string{bin, "serve", "--port={port}", "--base-url={base_url}", "--jupyter-url=" + hub}
	if !reflect.DeepEqual(reg.Command, want) || !IsBridgeRegistration(raw) {
		t.Fatalf("registration %s, want command %q", raw, want)
	}
	if changed, err := InstallRegistration(path, bin, hub, false); err != nil || changed {
		t.Fatalf("install again: %v %v", changed, err)
	}
	if changed, err := InstallRegistration(path, bin, "", false); err != nil || !changed {
		t.Fatalf("install without the URL: %v %v", changed, err)
	}
	if data, _ := os.ReadFile(path); strings.Contains(string(data), "jupyter-url") {
		t.Errorf("the URL is still registered:\n%s", data)
	}
	must(t, os.WriteFile(path, []byte(`{"ServerProxy": {"servers": {"megane": {"command": ["/b", "serve", "--port={port}", "--base-url={base_url}", "--jupyter-url="], "absolute_url": false, "timeout": 30, "launcher_entry": {"enabled": false}}}}}`), 0o644))
	if _, err := UninstallRegistration(path); err == nil {
		t.Error("uninstall removed an entry with an empty --jupyter-url, which install never writes")
	}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://hub.example.org{base_url}", true},
		{"http://proxy-public{base_url}", true},
		{"https://hub.example.org/user/alice/", true},
		{"hub.example.org{base_url}", false},
		{"ftp://hub.example.org/", false},
		{"https://{base_url}", false},
		{"https://user:s3cret-pw@hub.example.org{base_url}", false},
		{"https://hub.example.org{base_url}?token=s3cret-tok", false},
		{"https://hub.example.org{base_url}#s3cret-frag", false},
		{"https://hub.example.org:notaport/", false},
	} {
		err := CheckJupyterURL(tc.url)
		if (err == nil) != tc.ok {
			t.Errorf("CheckJupyterURL(%q) = %v, want ok %v", tc.url, err, tc.ok)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("CheckJupyterURL(%q) shows a credential: %v", tc.url, err)
		}
	}
}

// TestInstallAbsoluteURL: install --absolute-url writes the other path
// mode, and it is recognised as install's own (doctor does not call it a
// foreign registration; uninstall removes it).
func TestInstallAbsoluteURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jupyter_server_config.json")
	if changed, err := InstallRegistration(path, "/usr/bin/megane-jupyter-bridge", "", true); err != nil || !changed {
		t.Fatalf("install: %v %v", changed, err)
	}
	var cfg struct {
		ServerProxy struct {
			Servers map[string]json.RawMessage `json:"servers"`
		}
	}
	data, _ := os.ReadFile(path)
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatal(err)
	}
	raw := cfg.ServerProxy.Servers[ProxyServerName]
	if !strings.Contains(string(raw), `"absolute_url": true`) || !IsBridgeRegistration(raw) {
		t.Fatalf("registration %s", raw)
	}
	if changed, err := UninstallRegistration(path); err != nil || !changed {
		t.Fatalf("uninstall: %v %v", changed, err)
	}
}
