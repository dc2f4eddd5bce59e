--- dle.io: file formats. Adds to `dle`:
--   dle.save(path, value) / dle.load(path)       dle's own format (dle.io.dle_format)
--   dle.save_npy(path, t) / dle.load_npy(path)   NumPy .npy (dle.io.npy)
--   dle.save_safetensors(path, tensors, metadata, opts) / dle.load_safetensors(path)
--                                                safetensors (dle.io.safetensors)
--   dle.save_gguf(path, tensors, metadata, opts) / dle.load_gguf(path)
--                                                GGUF v3, llama.cpp's files (dle.io.gguf)
-- and dle.io.json_decode / dle.io.json_string (lua-cjson, dle.io.json).
-- Every save writes through dle.io.atomic: a temp file in the target directory, fsync, rename,
-- fsync of the directory; a crash or an error leaves the old file (or none), never a part.
local check = require("dle.check")
local common = require("dle.io.common")
local json = require("dle.io.json")

return function(dle)
  local public = common.public
  local formats = {
    require("dle.io.dle_format")(dle), require("dle.io.npy")(dle), require("dle.io.safetensors")(dle),
    require("dle.io.gguf")(dle),
  }
  for _, fns in ipairs(formats) do
    for name, impl in pairs(fns) do dle[name] = public(impl) end
  end
  dle.io = {
    --- Decodes JSON text into Lua values (null -> nil, exact integers -> integers).
    json_decode = function(s)
      check.string(s, "dle.io.json_decode", "text")
      local v, err = json.decode(s)
      if v == nil then error("dle.io.json_decode: invalid JSON: " .. err, 2) end
      return json.plain(v)
    end,
    --- A JSON string literal for s.
    json_string = function(s)
      check.string(s, "dle.io.json_string", "s")
      return json.string(s)
    end,
  }
end
