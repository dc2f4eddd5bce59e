--- progress_log_plot_spec.lua — dle.progress (counts, rate, ETA, live values; plain lines when
-- not on a terminal), dle.log.open (JSON lines read back by lua-cjson) and dle.plot (SVG parsed as
-- XML by lua-expat: axes, ticks, legend, one polyline per series), and dle.log staying the
-- elementwise log when called.
local dle = require "dle"
local H = require "helpers"
local dir = H.tmpdir()

-- a file-like sink collecting what the bar writes
local function sink()
  local s = {parts = {}}
  function s:write(...) for _, p in ipairs({...}) do self.parts[#self.parts + 1] = p end return self end
  function s:flush() end
  function s:text() return table.concat(self.parts) end
  return s
end

describe("dle.progress", function()
  it("iterates a count, a list and an iterator, printing count/total, rate, ETA and live values", function()
    local out = sink()
    local seen = {}
    local bar = dle.progress(5, {desc = "epoch", out = out, every = 0})
    for i in bar do seen[#seen + 1] = i; bar:set{loss = 1 / i} end
    assert.are.same({1, 2, 3, 4, 5}, seen)
    local text = out:text()
    assert.truthy(text:find("epoch", 1, true))
    assert.truthy(text:find("5/5", 1, true), text)
    assert.truthy(text:find("100%", 1, true))
    assert.truthy(text:find("it/s", 1, true))
    assert.truthy(text:find("loss=0.2", 1, true), text)
    assert.is_nil(text:find("\r", 1, true), "no carriage returns when the output is not a terminal")
    local vals = {}
    for i, v in dle.progress({"a", "b"}, {out = sink()}) do vals[i] = v end
    assert.are.same({"a", "b"}, vals)
    local k = 0
    local it = function() k = k + 1; if k <= 3 then return k end end
    local o2 = sink()
    for _ in dle.progress(it, {total = 3, out = o2}) do end
    assert.truthy(o2:text():find("3/3", 1, true), o2:text())
  end)

  it("iterates a DataLoader (the generic for's protocol) with its length as the total", function()
    local loader = dle.data.DataLoader({dle.arange(0, 10), dle.arange(0, 10)}, {batch_size = 3})
    local out, batches, rows = sink(), 0, 0
    for x, y in dle.progress(loader, {out = out}) do
      batches, rows = batches + 1, rows + x:size(1)
      assert.are.same(x:totable(), y:totable())
    end
    assert.are.equal(4, batches)
    assert.are.equal(10, rows)
    assert.truthy(out:text():find("4/4", 1, true), out:text())
  end)

  it("prints plain lines at most every `every` seconds, and a final line", function()
    local out = sink()
    local bar = dle.progress(1000, {out = out, every = 3600})
    for _ in bar do end
    local lines = 0
    for _ in out:text():gmatch("\n") do lines = lines + 1 end
    assert.are.equal(1, lines, out:text())
  end)

  it("bad arguments are errors naming progress", function()
    assert.matches("progress: expected a count", select(2, pcall(dle.progress, "x")))
    assert.matches("progress: unknown option", select(2, pcall(dle.progress, 3, {bogus = 1})))
    assert.matches("progress: a count must not be negative", select(2, pcall(dle.progress, -1)))
  end)
end)

describe("dle.log", function()
  it("is still the elementwise log when called", function()
    assert.is_true(math.abs(dle.log(dle.tensor({math.exp(2)})):item() - 2) < 1e-6)
  end)

  it("appends JSON lines with sorted keys; NaN as null, one-element tensors as numbers", function()
    local path = dir .. "/run.jsonl"
    local log = dle.log.open(path, {truncate = true})
    log:write{step = 1, loss = 0.5, name = "a\"b", ok = true}
    log:write{step = 2, loss = 0 / 0, t = dle.tensor({3.5})}
    log:close()
    local cjson = require "cjson"
    local lines = {}
    for l in io.lines(path) do lines[#lines + 1] = l end
    assert.are.equal(2, #lines)
    assert.are.equal('{"loss":0.5,"name":"a\\"b","ok":true,"step":1}', lines[1])
    local second = cjson.decode(lines[2])
    assert.are.equal(cjson.null, second.loss)
    assert.are.equal(3.5, second.t)
    local again = dle.log.open(path)
    again:write{step = 3}
    again:close()
    local n = 0
    for _ in io.lines(path) do n = n + 1 end
    assert.are.equal(3, n, "opening again appends")
    local l2 = dle.log.open(dir .. "/bad.jsonl")
    assert.matches("log:write: x is a function", select(2, pcall(l2.write, l2, {x = print})))
    assert.matches("one%-element", select(2, pcall(l2.write, l2, {t = dle.zeros(2)})))
  end)
end)

describe("dle.plot", function()
  -- the elements of an SVG document, by lua-expat (a parse error fails the test)
  local function parse(path)
    local lxp = require "lxp"
    local elements, texts, current = {}, {}, nil
    local p = lxp.new({
      StartElement = function(_, name, attrs)
        elements[#elements + 1] = {name = name, attrs = attrs}
        current = name
      end,
      CharacterData = function(_, s) if current == "text" then texts[#texts + 1] = s end end,
      EndElement = function() current = nil end,
    })
    local f = assert(io.open(path))
    assert(p:parse(f:read("a")))
    f:close()
    assert(p:parse())
    p:close()
    return elements, texts
  end

  it("writes an SVG with axes, ticks, a legend and one polyline per series", function()
    local path = dir .. "/curves.svg"
    dle.plot.lines(path, {train = {3, 2, 1.5, 1.2}, val = {{1, 2.5}, {4, 1.4}}}, {title = "loss <&>", xlabel = "epoch"})
    local elements, texts = parse(path)
    assert.are.equal("svg", elements[1].name)
    local polylines, legend = 0, {}
    for _, e in ipairs(elements) do
      if e.name == "polyline" then polylines = polylines + 1 end
      if e.name == "text" and e.attrs.class == "legend" then legend[#legend + 1] = true end
    end
    assert.are.equal(2, polylines)
    assert.are.equal(2, #legend)
    local all = table.concat(texts, "|")
    assert.truthy(all:find("train", 1, true) and all:find("val", 1, true))
    assert.truthy(all:find("loss <&>", 1, true), all)
    assert.truthy(all:find("epoch", 1, true))
    assert.truthy(all:find("|1.5|", 1, true) or all:find("|2|", 1, true), "tick labels: " .. all)
  end)

  it("plots a JSONL log's keys against its steps; bad series are errors naming plot.lines", function()
    local log = dle.log.open(dir .. "/p.jsonl", {truncate = true})
    for s = 1, 10 do log:write{step = s * 10, loss = 1 / s, acc = s / 10} end
    log:close()
    dle.plot.from_log(dir .. "/p.jsonl", dir .. "/p.svg", {"loss", "acc"})
    local elements = parse(dir .. "/p.svg")
    local n = 0
    for _, e in ipairs(elements) do
      if e.name == "polyline" then
        n = n + 1
        local count = 0
        for _ in e.attrs.points:gmatch("%S+") do count = count + 1 end
        assert.are.equal(10, count)
      end
    end
    assert.are.equal(2, n)
    assert.matches("plot.lines: series x item 2", select(2, pcall(dle.plot.lines, dir .. "/x.svg", {x = {1, "a"}})))
  end)
end)
