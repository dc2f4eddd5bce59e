-- luacheck configuration (Debian's lua-check), run by `scripts/test --lint`.
std = "lua54"
max_line_length = 120
-- `self` is often unused in methods that keep a uniform signature (Module:forward, cls:update).
self = false
exclude_files = {"build/**", "build-*/**", "docs/api/**"}
files["tests"] = {std = "+busted"}
files["tests/helpers.lua"] = {std = "+busted"}
-- premake's build script runs in premake's own environment (project, files, links, ...).
files["premake5.lua"] = {ignore = {"113"}, read_globals = {os = {fields = {"matchfiles"}}}}
-- tests may stand in for os/io functions (os.exit, io.open, ...) to exercise failure paths.
files["tests"].ignore = {"122"}
