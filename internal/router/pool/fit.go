package pool

// An online least-squares fit: the coefficients that best explain recent
// observations as a weighted sum of their features, drawn toward a prior
// in every direction the observations do not pin down.

import "math"

// fitDims is the most features a fit takes.
const fitDims = 4

// fit is a ridge regression over exponentially weighted observations:
// each new one counts 1, the one before it decay, the one before that
// decay², and so on. The solution minimizes their weighted squared
// errors plus ridge[k]·(θk − prior[k])², so that a feature every recent
// observation had at zero keeps its prior coefficient instead of taking
// an arbitrary one. Not safe for concurrent use.
type fit struct {
	n      int
	decay  float64
	prior  [fitDims]float64
	ridge  [fitDims]float64
	xx     [fitDims][fitDims]float64 // Σ w·x·xᵀ
	xy     [fitDims]float64          // Σ w·x·y
	theta  [fitDims]float64          // the solution after the last observation
	weight float64                   // Σ w: how many observations count, in effect
}

// newFit is a fit of n features whose coefficients start at prior, each
// held toward it as firmly as ridge observations with that feature at 1
// would hold it.
func newFit(decay float64, prior, ridge []float64) fit {
	f := fit{n: len(prior), decay: decay}
	copy(f.prior[:], prior)
	copy(f.ridge[:], ridge)
	f.theta = f.prior
	return f
}

// add folds in one observation, y with features x, and solves again.
// Observations that are not finite are passed over.
func (f *fit) add(x []float64, y float64) {
	if !finite(y) {
		return
	}
	for _, v := range x[:f.n] {
		if !finite(v) {
			return
		}
	}
	f.weight = f.decay*f.weight + 1
	for i := range f.n {
		f.xy[i] = f.decay*f.xy[i] + x[i]*y
		for j := range f.n {
			f.xx[i][j] = f.decay*f.xx[i][j] + x[i]*x[j]
		}
	}
	f.solve()
}

// solve sets theta to the ridge solution: (XX + R)·θ = XY + R·prior, by
// Gaussian elimination with partial pivoting. R is positive, so the
// system is never singular.
func (f *fit) solve() {
	var a [fitDims][fitDims + 1]float64
	n := f.n
	for i := range n {
		for j := range n {
			a[i][j] = f.xx[i][j]
		}
		a[i][i] += f.ridge[i]
		a[i][n] = f.xy[i] + f.ridge[i]*f.prior[i]
	}
	for col := range n {
		pivot := col
		for r := col + 1; r < n; r++ {
			if math.Abs(a[r][col]) > math.Abs(a[pivot][col]) {
				pivot = r
			}
		}
		a[col], a[pivot] = a[pivot], a[col]
		for r := col + 1; r < n; r++ {
			k := a[r][col] / a[col][col]
			for c := col; c <= n; c++ {
				a[r][c] -= k * a[col][c]
			}
		}
	}
	var theta [fitDims]float64
	for i := n - 1; i >= 0; i-- {
		s := a[i][n]
		for j := i + 1; j < n; j++ {
			s -= a[i][j] * theta[j]
		}
		theta[i] = s / a[i][i]
	}
	for i := range n {
		if !finite(theta[i]) {
			return // keep the last solution
		}
	}
	f.theta = theta
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }
