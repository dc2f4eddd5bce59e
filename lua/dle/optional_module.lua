--- dle.optional_module(name, prefix, what, hint) -> load: a C module dle may be built without
-- (MPI, NCCL). load() returns the module, required on the first call and kept, or nil and why it
-- is absent: "<prefix>the <what> module <name> failed to load: <error>" when its file is there, else
-- "<prefix><what> support was not built (no <file> beside dle.core's path: <hint>)".
return function(name, prefix, what, hint)
  local mod, why
  return function()
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
end
