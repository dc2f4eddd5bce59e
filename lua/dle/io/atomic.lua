--- dle.io.atomic: the one way dle.io writes a file. The bytes go to "<path>.tmp-<pid>" in the
-- target's directory; that file is flushed and fsync'ed, renamed over path, and the directory is
-- fsync'ed so that the rename itself survives a power cut. A reader therefore sees the old file
-- or the new one, never a part. Any error removes the temp file; temp files that killed
-- processes left behind ("<path>.tmp-<pid>" of a pid no longer alive) are removed by the next
-- save to the same path.
local core = require("dle.core")
local common = require("dle.io.common")

local fail = common.fail

local M = {}

--- The directory holding path ("." for a bare name).
function M.dirname(path)
  local dir = path:match("^(.*)/[^/]*$")
  if dir == nil then return "." end
  if dir == "" then return "/" end
  return dir
end

--- Writes path atomically: write(f) fills the temp file (it may raise; then nothing changes).
-- fn names the public function in errors.
function M.write(fn, path, write)
  if type(path) ~= "string" then fail("%s: path must be a string, got %s", fn, type(path)) end
  if path == "" or path:sub(-1) == "/" then fail("%s: path %q names no file", fn, path) end
  core._io_remove_stale(path, fn .. ": " .. path)
  local tmp = path .. ".tmp-" .. core._io_pid()
  local f, msg = io.open(tmp, "wb")
  if not f then fail("%s: cannot create the temporary file: %s", fn, msg) end
  local ok, err = pcall(function()
    write(f)
    core._io_sync(f, fn .. ": " .. path)
  end)
  f:close()
  if ok then
    local rok, rmsg = os.rename(tmp, path)
    if not rok then ok, err = false, string.format("%s: cannot rename %s to %s: %s", fn, tmp, path, rmsg) end
  end
  if not ok then
    os.remove(tmp)
    error(err, 0)
  end
  core._io_sync_dir(M.dirname(path), fn .. ": " .. path)
end

return M
