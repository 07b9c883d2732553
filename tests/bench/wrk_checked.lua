-- wrk script of the peers benchmark: POSTs the JSON bodies of a file (one per line,
-- argument 1) in turn, and checks EVERY response against the truth: the file of argument 2
-- holds "key count" lines, argument 3 names the key field. A response counts as right only
-- if it is a 200 without "errors" whose `"<key field>":"K","count":N` has N equal to K's
-- count in the truth. Prints one line "BENCHJSON {...}" (latencies in microseconds) with
-- the responses checked and the wrong ones.

local bodies = {}
local truth = {}
local pattern = nil
local index = 0
threads = {} -- global: read by done() in wrk_report.lua
bad = 0 -- not 200, or GraphQL errors
wrong = 0 -- 200 without errors, but no key and count or a count that is not the truth
checked = 0

function setup(thread)
  table.insert(threads, thread)
end

function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then
      table.insert(bodies, line)
    end
  end
  for line in io.lines(args[2]) do
    local key, count = string.match(line, "^(%S+) (%d+)$")
    if key then
      truth[key] = count
    end
  end
  pattern = '"' .. args[3] .. '"%s*:%s*"([^"]*)"%s*,%s*"count"%s*:%s*(%d+)'
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  index = math.random(#bodies) - 1 -- threads start at different bodies
end

function request()
  index = index % #bodies + 1
  return wrk.format(nil, nil, nil, bodies[index])
end

function response(status, headers, body)
  checked = checked + 1
  if status ~= 200 or string.find(body, '"errors"', 1, true) then
    bad = bad + 1
    return
  end
  local key, count = string.match(body, pattern)
  if not key or truth[key] ~= count then
    wrong = wrong + 1
  end
end

-- done(): the BENCHJSON line, shared with wrk_pairs.lua
dofile(string.match(debug.getinfo(1, "S").source, "^@(.*/)") .. "wrk_report.lua")
