package lua_test

import "os"

func writeFile(path, src string) error { return os.WriteFile(path, []byte(src), 0o644) }
