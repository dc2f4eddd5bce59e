--- bench/report.lua — turns measurements into rows (one per figure and thread setting, each with
-- its references and dle/ref ratios), prints them as a table and writes them as JSON.
-- A row's target (entry.target = {ref = label, min = r} or {ref = label, max = r}: the issue's bound
-- on dle/ref against that reference) is shown on that reference's line with whether it is met; an
-- absolute one ({max_value = v}: dle's median at most v in the figure's unit) on the first line.
-- entry.epoch_steps adds a row of the projected epoch time; entry.bytes_per_work (with
-- bytes_label, and refs[i].bytes_per_work for the references) a row of the achieved GB/s.
-- A measurement m = {entry, threads, dle = seconds-per-iteration stats, check = note or nil,
--   refs = {{label, seconds = stats} | {label, rate = stats in the entry's unit} | {label, skipped = why}}}.
local json = require("bench.json")

local M = {}

-- seconds-per-iteration stats -> stats in the entry's unit (a rate work/s, or a scaled time)
local function convert(e, s)
  if e.work then
    return {median = e.work / s.median, min = e.work / s.max, max = e.work / s.min, reps = s.reps, iters = s.iters}
  end
  return {median = s.median * e.scale, min = s.min * e.scale, max = s.max * e.scale, reps = s.reps, iters = s.iters}
end

local function scaled(s, f)
  return {median = s.median * f, min = s.min * f, max = s.max * f, reps = s.reps, iters = s.iters}
end

--- The rows of the report (what --json writes).
function M.rows(measurements)
  local rows = {}
  for _, m in ipairs(measurements) do
    local e = m.entry
    local row = {key = e.key, name = e.name, unit = e.unit, threads = m.threads, dle = convert(e, m.dle),
                 target = false, note = m.check or false, references = {}}
    for _, r in ipairs(m.refs) do
      local value = r.rate or (r.seconds and convert(e, r.seconds))
      local ref = {label = r.label, value = value or false, ratio = value and row.dle.median / value.median or false,
                   skipped = (not value) and (r.skipped or "no result") or false}
      row.references[#row.references + 1] = ref
      local t = e.target
      if t and t.ref == r.label then   -- the issue's target, a bound on the ratio against this reference
        ref.target = string.format("%s %sx %s", t.min and ">=" or "<=", tostring(t.min or t.max), t.ref)
        row.target = ref.target
        if ref.ratio then row.target_met = t.min and ref.ratio >= t.min or (t.max and ref.ratio <= t.max) or false end
      end
    end
    local t = e.target
    if t and t.max_value then
      row.target = string.format("dle <= %s %s", tostring(t.max_value), e.unit)
      row.target_met = row.dle.median <= t.max_value
      row.absolute_target = true
    end
    rows[#rows + 1] = row
    if e.epoch_steps then   -- a derived row: the projected epoch time in seconds
      local f = e.epoch_steps / 1e3
      local ep = {key = e.key .. "_epoch", name = string.format("  projected epoch (%d steps)", e.epoch_steps),
                  unit = "s",
                  threads = m.threads, dle = scaled(row.dle, f), target = false, note = false, references = {}}
      for _, r in ipairs(row.references) do   -- same ratios; the target stays on the step's row
        ep.references[#ep.references + 1] = {label = r.label, value = r.value and scaled(r.value, f) or false,
                                             ratio = r.ratio, skipped = r.skipped}
      end
      rows[#rows + 1] = ep
    end
    if e.bytes_per_work then   -- a derived row: bytes moved per unit of work times the rate, in GB/s
      local gb = {key = e.key .. "_gbs", name = "  achieved GB/s (" .. e.bytes_label .. ")", unit = "GB/s",
                  threads = m.threads, dle = scaled(row.dle, e.bytes_per_work / 1e9), target = false, note = false,
                  references = {}}
      for i, r in ipairs(row.references) do   -- each reference by its own bytes (none given: left out)
        local b = e.refs[i] and e.refs[i].bytes_per_work
        if b then
          gb.references[#gb.references + 1] = {label = r.label, value = r.value and scaled(r.value, b / 1e9),
            ratio = r.value and gb.dle.median / (r.value.median * b / 1e9) or false, skipped = r.skipped}
        end
      end
      rows[#rows + 1] = gb
    end
  end
  return rows
end

local function num(v)
  local a = math.abs(v)
  if a >= 100 then return string.format("%.0f", v)
  elseif a >= 10 then return string.format("%.1f", v)
  elseif a >= 0.1 then return string.format("%.2f", v) end
  return string.format("%.3g", v)
end

local function value_str(s, unit)
  return string.format("%s %s [%s..%s]", num(s.median), unit, num(s.min), num(s.max))
end

--- Prints the rows as an aligned text table (one line per reference; the figure and dle's value
-- on the first).
function M.print_table(rows, out)
  out = out or io.stdout
  local t = {{"figure", "thr", "dle: median [min..max]", "reference", "reference: median [min..max]", "dle/ref",
              "target"}}
  for _, r in ipairs(rows) do
    local refs = #r.references > 0 and r.references or {{label = "-", value = false, ratio = false, skipped = false}}
    for i, ref in ipairs(refs) do
      t[#t + 1] = {
        i == 1 and r.name or "", i == 1 and (r.threads == "process" and "-" or tostring(r.threads)) or "",
        i == 1 and value_str(r.dle, r.unit) or "",
        ref.label,
        ref.value and value_str(ref.value, r.unit) or (ref.skipped and ("skipped: " .. ref.skipped) or "-"),
        ref.ratio and string.format("%.2f", ref.ratio) or "-",
        (i == 1 and r.absolute_target) and (r.target .. (r.target_met and ": met" or ": not met"))
          or ref.target and (ref.ratio and (ref.target .. (r.target_met and ": met" or ": not met")) or ref.target)
              or "",
      }
    end
    if r.note then t[#t + 1] = {"  (" .. r.note .. ")", "", "", "", "", "", ""} end
  end
  local width = {}
  for _, row in ipairs(t) do
    for c, cell in ipairs(row) do width[c] = math.max(width[c] or 0, utf8.len(cell) or #cell) end
  end
  local right = {[2] = true, [3] = true, [5] = true, [6] = true}
  for i, row in ipairs(t) do
    local cells = {}
    for c, cell in ipairs(row) do
      local pad = string.rep(" ", width[c] - (utf8.len(cell) or #cell))
      cells[c] = right[c] and pad .. cell or cell .. pad
    end
    out:write("| ", table.concat(cells, " | "), " |\n")
    if i == 1 then
      local dash = {}
      for c = 1, #row do dash[c] = string.rep("-", width[c]) end
      out:write("|-", table.concat(dash, "-|-"), "-|\n")
    end
  end
end

--- Appends one run to a markdown log (bench/RESULTS.md): a dated heading, the command, the run's
-- description lines, the table and its notes. Earlier runs are kept; the newest is last.
-- @param run {title, command, head = list of lines, rows, notes = list of lines}
function M.append_markdown(path, run)
  local f, err = io.open(path, "a")
  if not f then error("bench: cannot append to " .. tostring(err), 0) end
  f:write("\n## ", run.title, "\n\n", "`", run.command, "`\n\n")
  for _, line in ipairs(run.head) do f:write("- ", line, "\n") end
  f:write("\n")
  M.print_table(run.rows, f)
  if #run.notes > 0 then
    f:write("\n")
    for _, n in ipairs(run.notes) do f:write("- note: ", n, "\n") end
  end
  f:close()
end

function M.write_json(path, doc)
  local f, err = io.open(path, "w")
  if not f then error("bench: cannot write " .. tostring(err), 0) end
  f:write(json.encode(doc), "\n")
  f:close()
end

return M
