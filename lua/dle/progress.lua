--- dle.progress: a progress bar for loops (API.md, "Long runs, logs and pictures").
--   for i in dle.progress(100, {desc = "epoch 1"}) do ... end
--   local bar = dle.progress(loader, {desc = "train"})      -- a list, or an iterator function
--   for step, batch in bar do ...; bar:set{loss = l:item()} end
-- The bar shows count/total, rate, ETA and the values given to bar:set. On a terminal (stderr)
-- it redraws in place; otherwise (CI, a pipe) it prints a plain line every `every` seconds and
-- one at the end. It writes to stderr so that a script's stdout stays its own.
local dle = require("dle")
local check = require("dle.check")

local Bar = {}
Bar.__index = Bar
Bar.__name = "dle.Progress"

local tty -- whether stderr is a terminal (asked once)
local function stderr_is_terminal()
  if tty == nil then tty = os.execute("test -t 2") == true end
  return tty
end

local function duration(s)
  if s ~= s or s == math.huge then return "?" end
  s = math.floor(s + 0.5)
  local h, m = s // 3600, s % 3600 // 60
  if h > 0 then return string.format("%d:%02d:%02d", h, m, s % 60) end
  return string.format("%d:%02d", m, s % 60)
end

local function value_text(v)
  if math.type(v) == "float" then return string.format("%.4g", v) end
  return tostring(v)
end

--- The bar's line: desc, count/total, a bar when the total is known, rate, elapsed/ETA, values.
function Bar:line()
  local now = dle.time()
  local elapsed = now - self.start
  local rate = self.count > 0 and self.count / math.max(elapsed, 1e-9) or 0
  local parts = {}
  if self.desc then parts[#parts + 1] = self.desc end
  if self.total then
    local frac = self.total > 0 and math.min(1, self.count / self.total) or 1
    local width = 20
    local full = math.floor(frac * width)
    parts[#parts + 1] = string.format("%3d%% [%s%s] %d/%d", math.floor(frac * 100), string.rep("=", full),
                                      string.rep(" ", width - full), self.count, self.total)
    local left = rate > 0 and (self.total - self.count) / rate or math.huge
    parts[#parts + 1] = string.format("%.3g it/s  %s<%s", rate, duration(elapsed), duration(left))
  else
    parts[#parts + 1] = string.format("%d  %.3g it/s  %s", self.count, rate, duration(elapsed))
  end
  local keys = {}
  for k in pairs(self.values) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do parts[#parts + 1] = k .. "=" .. value_text(self.values[k]) end
  return table.concat(parts, "  ")
end

-- Draws the bar: in place on a terminal (at most 10 times a second), else a plain line every
-- `every` seconds; the final line ends it (a plain final line only when something changed since
-- the last one, so that a count printed at every step is not printed twice).
function Bar:_show(final)
  local now = dle.time()
  if self.tty then
    if not final and now - self.shown < 0.1 then return end
    self.out:write("\r", self:line(), "\27[K", final and "\n" or "")
  else
    if not final and now - self.shown < self.every then return end
    if final and not self.changed then return end
    self.out:write(self:line(), "\n")
  end
  self.out:flush()
  self.shown, self.changed = now, false
end

--- bar:set{name = value, ...}: live values shown after the rate (a loss, an accuracy).
function Bar:set(values)
  check.table(values, "progress:set", "values")
  for k, v in pairs(values) do self.values[k] = v end
  self.changed = true
  self:_show(false)
  return self
end

--- bar:update(n): counts n more steps (default 1), for loops that do not iterate the bar.
function Bar:update(n)
  self.count = self.count + (n or 1)
  self.changed = true
  self:_show(false)
  return self
end

--- bar:print(text): prints a line of text on stdout above the bar (as tqdm.write does), so a
-- script's own report lines and a bar redrawn in place on a terminal do not run into each other.
function Bar:print(text)
  check.string(text, "progress:print", "text")
  if self.tty and not self.closed then self.out:write("\r\27[K"); self.out:flush() end
  io.stdout:write(text, "\n")
  io.stdout:flush()
  if self.tty and not self.closed then self.shown = -math.huge; self:_show(false) end
  return self
end

--- bar:close(): the final line (once; iterating to the end closes the bar too).
function Bar:close()
  if self.closed then return end
  self.closed = true
  self:_show(true)
end

-- The iteration: the next item of the source, counting the previous one as done.
Bar.__call = function(self)
  if self.started then self:update(1) else self.started = true end
  local a, b = self.next_item()
  if a == nil then self:close() end
  return a, b
end

--- dle.progress(iterable_or_n, opts) -> a bar to iterate (`for ... in bar do`) or update by hand.
-- @param iterable_or_n a count n (yields 1..n), a list (yields i, v), or an iterator function
--   (yields what it returns; a callable table counts as one, its # as the total)
-- @param opts optional {desc = text, total = n (for iterators), every = seconds between plain
--   lines when stderr is not a terminal (default 10), out = a file (default io.stderr)}
local function progress(source, opts)
  opts = check.options(opts, "progress", {"desc", "total", "every", "out"})
  local self = setmetatable({count = 0, values = {}, desc = opts.desc, every = opts.every or 10,
                             out = opts.out or io.stderr, start = dle.time(), changed = true}, Bar)
  self.tty = opts.out == nil and stderr_is_terminal()
  self.shown = self.start
  if math.type(source) == "integer" then
    if source < 0 then check.error("progress: a count must not be negative, got " .. source) end
    local i = 0
    self.total = source
    self.next_item = function()
      if i >= source then return nil end
      i = i + 1
      return i
    end
  elseif type(source) == "table" and getmetatable(source) == nil then
    local i = 0
    self.total = #source
    self.next_item = function()
      i = i + 1
      if source[i] == nil then return nil end
      return i, source[i]
    end
  elseif type(source) == "function" or (type(source) == "table" and getmetatable(source)
                                        and getmetatable(source).__call) then
    self.total = opts.total
    if not self.total and type(source) == "table" and getmetatable(source).__len then self.total = #source end
    -- the generic for's protocol: the control value is the previous first result (a DataLoader
    -- starts a new epoch on nil)
    local ctl
    self.next_item = function()
      local a, b = source(nil, ctl)
      ctl = a
      return a, b
    end
  else
    check.error("progress: expected a count, a list or an iterator, got " .. check.typename(source))
  end
  if opts.total ~= nil then
    if math.type(opts.total) ~= "integer" or opts.total < 0 then
      check.error("progress: total must be a non-negative integer, got " .. tostring(opts.total))
    end
    self.total = opts.total
  end
  return self
end

return {progress = progress}
