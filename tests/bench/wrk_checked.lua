-- wrk script of the peers benchmark: POSTs the JSON bodies of a file (one per line,
-- argument 1) in turn, and checks EVERY response against the truth: the file of argument 2
-- holds "key count" lines, argument 3 names the key field. A response counts as right only
-- if it is a 200 without "errors" whose `"<key field>":"K","count":N` has N equal to K's
-- count in the truth. Prints one line "BENCHJSON {...}" (latencies in microseconds) with
-- the responses checked and the wrong ones.

local truth = {}
local pattern = nil
-- bodies, index, threads, load_bodies, setup, request and done(): shared with wrk_pairs.lua
dofile(string.match(debug.getinfo(1, "S").source, "^@(.*/)") .. "wrk_common.lua")

bad = 0 -- not 200, or GraphQL errors
wrong = 0 -- 200 without errors, but no key and count or a count that is not the truth
checked = 0

function init(args)
  load_bodies(args[1])
  for line in io.lines(args[2]) do
    local key, count = string.match(line, "^(%S+) (%d+)$")
    if key then
      truth[key] = count
    end
  end
  pattern = '"' .. args[3] .. '"%s*:%s*"([^"]*)"%s*,%s*"count"%s*:%s*(%d+)'
  index = math.random(#bodies) - 1 -- threads start at different bodies
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
