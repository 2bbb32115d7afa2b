-- The io library's buffers: a file written in the current directory (the build tree) with
-- write/format, read back with every read format, seek, lines, and setvbuf; os.date and
-- os.time on fixed dates.

local name = "carat-io-test.tmp"
local f = assert(io.open(name, "w"))
f:setvbuf("full", 1024)
for i = 1, 5000 do
  f:write(i, " ", i * 1.5, " ", ("w"):rep(i % 7), "\n")
end
f:write("last line without newline")
assert(f:close())

-- read("n"), read("l"), read("L") and read(number).
f = assert(io.open(name, "r"))
local sumi, sumf, words = 0, 0, 0
for i = 1, 5000 do
  local a, b = f:read("n", "n")
  assert(a == i and math.type(a) == "integer" and b == i * 1.5)
  sumi = sumi + a; sumf = sumf + b
  local rest = f:read("l")
  assert(rest == " " .. ("w"):rep(i % 7))
  words = words + #rest - 1
end
assert(f:read("L") == "last line without newline")
assert(f:read("l") == nil and f:read(0) == nil and f:read("a") == "")
assert(sumi == 5000 * 5001 // 2 and sumf == 1.5 * sumi)

-- seek: size, absolute and relative positions, read(number).
local size = f:seek("end")
local whole
f:seek("set")
whole = f:read("a")
assert(#whole == size)
f:seek("set", 2)
assert(f:read(3) == "1.5")
assert(f:seek("cur") == 5)
f:seek("cur", -5)
assert(f:read(1) == "1")
f:close()
assert(not pcall(f.read, f))          -- closed file
assert(io.type(f) == "closed file")

-- lines with formats, and the count of lines in the whole text.
local n = 0
for line in io.lines(name) do n = n + 1 end
assert(n == 5001)
local total = 0
for a in io.lines(name, "n") do total = total + a; if total > 0 then break end end
assert(total == 1)
local nl = select(2, whole:gsub("\n", ""))
assert(nl == 5000)

-- Append mode, and a big single write.
f = assert(io.open(name, "a+"))
local blob = ("0123456789abcdef"):rep(65536)    -- 1 MiB
f:write(blob)
f:seek("set", size)
assert(f:read("a") == blob)
f:close()

-- Binary data survives unchanged.
f = assert(io.open(name, "wb"))
local bin = {}
for i = 0, 255 do bin[#bin + 1] = string.char(i, 255 - i) end
bin = table.concat(bin):rep(100)
f:write(bin)
f:close()
f = assert(io.open(name, "rb"))
assert(f:read("a") == bin)
f:close()
assert(os.remove(name))
assert(not io.open(name, "r"))

-- Dates: formatting a fixed time in UTC, and os.time's normalisation.
assert(os.date("!%Y-%m-%d %H:%M:%S", 1700000000) == "2023-11-14 22:13:20")
local d = os.date("!*t", 86400 * 365)
assert(d.year == 1971 and d.month == 1 and d.day == 1 and d.yday == 1)
local t1 = os.time({year = 2020, month = 1, day = 31, hour = 12})
local t2 = os.time({year = 2020, month = 2, day = 0, hour = 12})  -- normalised to Jan 31
assert(t1 == t2)
local t3 = os.time({year = 2020, month = 3, day = 1, hour = 12})
assert(os.difftime(t3, t1) == 30 * 86400)           -- 2020 is a leap year
