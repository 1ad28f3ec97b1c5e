package jupyter

func dataDirCases(home string) []dataDirCase {
	return []dataDirCase{
		{"APPDATA", map[string]string{"APPDATA": `C:\Users\ada\AppData\Roaming`},
			`C:\Users\ada\AppData\Roaming\jupyter`, `C:\Users\ada\AppData\Roaming\jupyter\runtime`},
		{"no APPDATA", map[string]string{"JUPYTER_CONFIG_DIR": `C:\cfg`}, `C:\cfg\data`, `C:\cfg\data\runtime`},
	}
}
