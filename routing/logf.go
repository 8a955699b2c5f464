package routing

import "math"

// The polar method calls std::log on a float, which is glibc's logf. That
// function is not correctly rounded (up to 0.82 ulp): a rounded float64
// logarithm differs from it on about one float in 5000 in (0, 1], and one
// such difference shifts every later normal draw. glibcLogf replays glibc's algorithm (glibc 2.27
// and later, sysdeps/ieee754/flt-32/e_logf.c): a 16-entry table around
// 1/c and log(c), then a degree-4 polynomial evaluated in double.
//
// glibc on x86-64 picks a build of that code compiled with FMA when the CPU
// has it (AArch64 compilers contract the same expressions); the fused steps
// are reproduced with math.FMA. Over (0, 1], the only arguments the polar
// method passes, this matched glibc 2.36's logf on every float, and the
// unfused build gives the same floats there too.

const (
	logfTableBits = 4
	logfOff       = 0x3f330000
	logfLn2       = 0x1.62e42fefa39efp-1
	logfA0        = -0x1.00ea348b88334p-2
	logfA1        = 0x1.5575b0be00b6ap-2
	logfA2        = -0x1.ffffef20a4123p-2
)

// logfTable holds {1/c, log(c)} for each subinterval of [logfOff, 2*logfOff].
var logfTable = [1 << logfTableBits][2]float64{
	{0x1.661ec79f8f3bep+0, -0x1.57bf7808caadep-2},
	{0x1.571ed4aaf883dp+0, -0x1.2bef0a7c06ddbp-2},
	{0x1.49539f0f010bp+0, -0x1.01eae7f513a67p-2},
	{0x1.3c995b0b80385p+0, -0x1.b31d8a68224e9p-3},
	{0x1.30d190c8864a5p+0, -0x1.6574f0ac07758p-3},
	{0x1.25e227b0b8eap+0, -0x1.1aa2bc79c81p-3},
	{0x1.1bb4a4a1a343fp+0, -0x1.a4e76ce8c0e5ep-4},
	{0x1.12358f08ae5bap+0, -0x1.1973c5a611cccp-4},
	{0x1.0953f419900a7p+0, -0x1.252f438e10c1ep-5},
	{0x1p+0, 0x0p+0},
	{0x1.e608cfd9a47acp-1, 0x1.aa5aa5df25984p-5},
	{0x1.ca4b31f026aap-1, 0x1.c5e53aa362eb4p-4},
	{0x1.b2036576afce6p-1, 0x1.526e57720db08p-3},
	{0x1.9c2d163a1aa2dp-1, 0x1.bc2860d22477p-3},
	{0x1.886e6037841edp-1, 0x1.1058bc8a07ee1p-2},
	{0x1.767dcf5534862p-1, 0x1.4043057b6ee09p-2},
}

// glibcLogf returns logf(x) as glibc computes it on an FMA-capable host.
func glibcLogf(x float32) float32 {
	ix := math.Float32bits(x)
	if ix == 0x3f800000 {
		return 0
	}
	if ix-0x00800000 >= 0x7f800000-0x00800000 {
		switch {
		case ix<<1 == 0:
			return float32(math.Inf(-1))
		case ix == 0x7f800000:
			return x
		case ix&0x80000000 != 0 || ix<<1 >= 0xff000000:
			return float32(math.NaN())
		}
		// Subnormal: scale into the normal range and remove the scale from
		// the exponent.
		ix = math.Float32bits(x*0x1p23) - 23<<23
	}
	tmp := ix - logfOff
	i := (tmp >> (23 - logfTableBits)) % (1 << logfTableBits)
	k := int32(tmp) >> 23
	iz := ix - tmp&(0x1ff<<23)
	invc, logc := logfTable[i][0], logfTable[i][1]
	z := float64(math.Float32frombits(iz))

	r := math.FMA(z, invc, -1)
	y0 := math.FMA(float64(k), logfLn2, logc)
	r2 := r * r
	y := math.FMA(logfA1, r, logfA2)
	y = math.FMA(logfA0, r2, y)
	y = math.FMA(y, r2, y0+r)
	return float32(y)
}
