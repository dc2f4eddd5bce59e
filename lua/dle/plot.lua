--- dle.plot: standalone SVG line charts of training curves (API.md, "Long runs, logs and
-- pictures"): axes with "nice" ticks (1, 2, 5 times a power of ten), a legend, one polyline per
-- series; a log scale for y on request. Opens in any browser; no JavaScript, no external files.
--   dle.plot.lines("loss.svg", {train = losses, val = {{1, 0.9}, {5, 0.7}}}, {title = "loss"})
--   dle.plot.from_log("run.jsonl", "run.svg", {"loss", "acc"})     -- x: the records' step
local check = require("dle.check")
local atomic = require("dle.io.atomic")

local M = {}

local COLORS = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"}

local function esc(s)
  return (tostring(s):gsub("[&<>\"]", {["&"] = "&amp;", ["<"] = "&lt;", [">"] = "&gt;", ['"'] = "&quot;"}))
end

-- Ticks covering [lo, hi] at a 1/2/5 step giving about n of them.
local function ticks(lo, hi, n)
  if hi <= lo then hi = lo + 1 end
  local raw = (hi - lo) / n
  local p = 10 ^ math.floor(math.log(raw, 10))
  local step = p
  for _, m in ipairs({1, 2, 5, 10}) do
    if m * p >= raw then step = m * p; break end
  end
  local out = {}
  local t = math.ceil(lo / step - 1e-9) * step
  while t <= hi + step * 1e-9 do
    out[#out + 1] = math.abs(t) < step * 1e-9 and 0 or t
    t = t + step
  end
  return out
end

local function label(v)
  return string.format("%.6g", v)
end

-- Points {x, y} of a series given as numbers (x = 1, 2, ...) or pairs; finite ones only.
local function points(name, s, logy)
  if type(s) ~= "table" then check.error("plot.lines: series " .. tostring(name) .. " must be a list") end
  local pts = {}
  for i, v in ipairs(s) do
    local x, y
    if type(v) == "number" then x, y = i, v
    elseif type(v) == "table" and type(v[1]) == "number" and type(v[2]) == "number" then x, y = v[1], v[2]
    else check.error(string.format("plot.lines: series %s item %d is neither a number nor an {x, y} pair", name, i)) end
    local ok = x == x and y == y and math.abs(x) ~= math.huge and math.abs(y) ~= math.huge and (not logy or y > 0)
    if ok then pts[#pts + 1] = {x, logy and math.log(y, 10) or y} end
  end
  return pts
end

--- The SVG text of a chart (what lines writes).
function M.svg(series, opts)
  check.table(series, "plot.lines", "series")
  opts = check.options(opts, "plot.lines", {"title", "xlabel", "ylabel", "width", "height", "logy"})
  local W, Hh = opts.width or 720, opts.height or 440
  local L, R, T, B = 70, 150, opts.title and 40 or 20, 50
  local names = {}
  for k in pairs(series) do names[#names + 1] = k end
  table.sort(names, function(a, b) return tostring(a) < tostring(b) end)
  local all, xmin, xmax, ymin, ymax = {}, math.huge, -math.huge, math.huge, -math.huge
  for _, k in ipairs(names) do
    all[k] = points(k, series[k], opts.logy)
    for _, p in ipairs(all[k]) do
      xmin, xmax = math.min(xmin, p[1]), math.max(xmax, p[1])
      ymin, ymax = math.min(ymin, p[2]), math.max(ymax, p[2])
    end
  end
  if xmin > xmax then xmin, xmax, ymin, ymax = 0, 1, 0, 1 end
  if xmax == xmin then xmax = xmin + 1 end
  if ymax == ymin then ymin, ymax = ymin - 0.5, ymax + 0.5 end
  local pad = (ymax - ymin) * 0.05
  ymin, ymax = ymin - pad, ymax + pad
  local pw, ph = W - L - R, Hh - T - B
  local function sx(x) return L + (x - xmin) / (xmax - xmin) * pw end
  local function sy(y) return T + ph - (y - ymin) / (ymax - ymin) * ph end
  local o = {string.format('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" '
    .. 'font-family="sans-serif" font-size="12">', W, Hh, W, Hh),
    string.format('<rect width="%d" height="%d" fill="white"/>', W, Hh)}
  if opts.title then
    o[#o + 1] = string.format('<text x="%d" y="24" text-anchor="middle" font-size="15">%s</text>', L + pw // 2,
                              esc(opts.title))
  end
  -- grid, ticks and their labels
  for _, t in ipairs(ticks(xmin, xmax, 6)) do
    local x = sx(t)
    o[#o + 1] = string.format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e6e6e6"/>', x, T, x, T + ph)
    o[#o + 1] = string.format('<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="black"/>', x, T + ph, x, T + ph + 5)
    o[#o + 1] = string.format('<text x="%.1f" y="%d" text-anchor="middle">%s</text>', x, T + ph + 18, label(t))
  end
  for _, t in ipairs(ticks(ymin, ymax, 6)) do
    local y = sy(t)
    o[#o + 1] = string.format('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e6e6e6"/>', L, y, L + pw, y)
    o[#o + 1] = string.format('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="black"/>', L - 5, y, L, y)
    o[#o + 1] = string.format('<text x="%d" y="%.1f" text-anchor="end">%s</text>', L - 8, y + 4,
                              label(opts.logy and 10 ^ t or t))
  end
  -- axes
  o[#o + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', L, T + ph, L + pw, T + ph)
  o[#o + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>', L, T, L, T + ph)
  if opts.xlabel then
    o[#o + 1] = string.format('<text x="%d" y="%d" text-anchor="middle">%s</text>', L + pw // 2, Hh - 10,
                              esc(opts.xlabel))
  end
  if opts.ylabel then
    o[#o + 1] = string.format('<text x="16" y="%d" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>',
                              T + ph // 2, T + ph // 2, esc(opts.ylabel))
  end
  -- one polyline per series, and the legend
  for i, k in ipairs(names) do
    local color = COLORS[(i - 1) % #COLORS + 1]
    local pts = {}
    for j, p in ipairs(all[k]) do pts[j] = string.format("%.1f,%.1f", sx(p[1]), sy(p[2])) end
    if #pts > 0 then
      o[#o + 1] = string.format('<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="2" '
        .. 'points="%s"/>', esc(k), color, table.concat(pts, " "))
    end
    local ly = T + 10 + (i - 1) * 20
    o[#o + 1] = string.format('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="3"/>',
                              L + pw + 15, ly, L + pw + 40, ly, color)
    o[#o + 1] = string.format('<text class="legend" x="%d" y="%d">%s</text>', L + pw + 46, ly + 4, esc(k))
  end
  o[#o + 1] = "</svg>"
  return table.concat(o, "\n") .. "\n"
end

--- dle.plot.lines(path, series, opts): writes the chart of series (name -> list of numbers, x =
-- 1, 2, ..., or of {x, y} pairs) to path as SVG (atomically).
-- @param opts optional {title, xlabel, ylabel, width = 720, height = 440, logy = false}
function M.lines(path, series, opts)
  check.string(path, "plot.lines", "path")
  local text = M.svg(series, opts)
  atomic.write("plot.lines", path, function(f) f:write(text) end)
end

--- dle.plot.from_log(jsonl_path, svg_path, keys, opts): the chart of the given keys of a JSONL log
-- (dle.log), x = each record's `step` (or its line number); one series per key.
function M.from_log(jsonl, svg, keys, opts)
  check.string(jsonl, "plot.from_log", "jsonl_path")
  check.string(svg, "plot.from_log", "svg_path")
  check.table(keys, "plot.from_log", "keys")
  local records = require("dle.runlog").read(jsonl, "plot.from_log")
  local series = {}
  for _, k in ipairs(keys) do series[k] = {} end
  for i, r in ipairs(records) do
    local x = type(r.step) == "number" and r.step or i
    for _, k in ipairs(keys) do
      if type(r[k]) == "number" then table.insert(series[k], {x, r[k]}) end
    end
  end
  opts = opts or {}
  if opts.xlabel == nil then
    local copy = {}
    for k, v in pairs(opts) do copy[k] = v end
    copy.xlabel = "step"
    opts = copy
  end
  M.lines(svg, series, opts)
end

return M
