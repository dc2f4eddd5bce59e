--- dle.optional_module(name, prefix, what, hint) -> opt: a C module dle may be built without (MPI,
-- NCCL), required on the first opt.load() and kept.
--   opt.load() -> the module, or nil and why it is absent: "<prefix>the <what> module <name> failed
--     to load: <error>" when its file is there, else "<prefix><what> support was not built (no
--     <file> beside dle.core's path: <hint>)"
--   opt.available() -> true, or false and why (the answer of dle.dist.is_available and the like)
--   opt.loaded() -> the module once a load() has found it, else nil (it never loads)
return function(name, prefix, what, hint)
  local mod, why
  local opt = {}
  function opt.load()
    if mod or why then return mod, why end
    local ok, m = pcall(require, name)
    if ok then
      mod = m
    elseif package.searchpath(name, package.cpath) then
      why = prefix .. "the " .. what .. " module " .. name .. " failed to load: " .. tostring(m)
    else
      why = prefix .. what .. " support was not built (no " .. name:gsub("%.", "/") .. ".so beside "
        .. tostring(package.searchpath("dle.core", package.cpath)) .. ": " .. hint .. ")"
    end
    return mod, why
  end
  function opt.available()
    if opt.load() then return true end
    return false, why
  end
  function opt.loaded() return mod end
  return opt
end
