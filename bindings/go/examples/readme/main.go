// The README's example in Go: fit w in x @ w = t by gradient descent — build, differentiate,
// compile, run. `go run ./examples/readme` prints the loss before and after 200 steps.
package main

import (
	"fmt"
	"log"

	"chutney/bindings/go/chutney"
)

func main() {
	first, last, err := fit(200)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("loss %g -> %g\n", first, last)
	if !(last < first/100) {
		log.Fatal("the loss did not fall a hundredfold")
	}
}

// fit runs `steps` gradient-descent steps and returns the first and the last loss.
func fit(steps int) (first, last float32, err error) {
	ctx, err := chutney.NewContext(nil)
	if err != nil {
		return 0, 0, err
	}
	defer ctx.Close()
	g, err := ctx.NewGraph()
	if err != nil {
		return 0, 0, err
	}
	defer g.Close()

	w0, err := chutney.Zeros(chutney.Float32, 3, 1) // 1. build: y = x @ w
	if err != nil {
		return 0, 0, err
	}
	defer w0.Close()
	x := g.Input("x", chutney.Float32, 4, 3)
	t := g.Input("t", chutney.Float32, 4, 1)
	w := g.Variable("w", w0)
	d := g.Sub(g.MatMul(x, w, false, false), t)
	loss := g.Mean(g.Mul(d, d), nil, false) // loss = mean((x@w - t)^2)
	dw := g.Grad(loss, w)[0]                // 2. differentiate
	step := g.Mul(dw, g.Scalar(chutney.Float32, 0.1))
	g.Assign(w, g.Sub(w, step))  // after each run: w -= 0.1 dw
	plan, err := g.Compile(loss) // 3. compile (reports any building error above)
	if err != nil {
		return 0, 0, err
	}
	defer plan.Close()

	xv, err := chutney.NewTensor([]float32{1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, 4, 3)
	if err != nil {
		return 0, 0, err
	}
	defer xv.Close()
	tv, err := chutney.NewTensor([]float32{1, 2, 3, 6}, 4, 1)
	if err != nil {
		return 0, 0, err
	}
	defer tv.Close()
	lv, err := plan.NewOutput(0)
	if err != nil {
		return 0, 0, err
	}
	defer lv.Close()
	feeds := []chutney.Feed{{Node: x, Value: xv}, {Node: t, Value: tv}}
	l := make([]float32, 1)
	for i := 0; i < steps; i++ { // 4. run, many times
		if err := plan.Run(feeds, lv); err != nil {
			return 0, 0, err
		}
		if err := chutney.Read(lv, l); err != nil {
			return 0, 0, err
		}
		if i == 0 {
			first = l[0]
		}
	}
	return first, l[0], nil
}
