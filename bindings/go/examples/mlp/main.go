// MLP training on Fashion-MNIST through the Go binding: the model, optimizer, schedule, data
// order and seed of `chutney train --model mlp`, so that `--print-steps` prints the same
// per-update losses as the CLI, bit for bit (mlp_test.go checks it).
//
//	go run ./examples/mlp -epochs 1 -limit 1280 -print-steps
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"

	"chutney/bindings/go/chutney"
)

// Config mirrors the CLI's options for the MLP (and their defaults).
type Config struct {
	Epochs     int64
	Batch      int64
	LR         float64
	Momentum   float64
	Seed       uint64
	Limit      int64 // > 0: train on this many (shuffled) images per epoch
	EvalBatch  int64
	DataDir    string
	PrintSteps bool
}

// The CLI's pixel normalisation (Fashion-MNIST training-set statistics).
const (
	pixelMean = 0.2860
	pixelStd  = 0.3530
)

func main() {
	c := Config{}
	flag.Int64Var(&c.Epochs, "epochs", 2, "passes over the training set")
	flag.Int64Var(&c.Batch, "batch-size", 128, "images per update")
	flag.Float64Var(&c.LR, "lr", 0.05, "SGD learning rate (cosine schedule)")
	flag.Float64Var(&c.Momentum, "momentum", 0.9, "SGD momentum")
	flag.Uint64Var(&c.Seed, "seed", 1, "seed of the weights and the shuffling")
	flag.Int64Var(&c.Limit, "limit", 0, "train on N images per epoch only")
	flag.Int64Var(&c.EvalBatch, "eval-batch-size", 0, "images per evaluation step (default: -batch-size)")
	flag.StringVar(&c.DataDir, "data-dir", "", "folder of the Fashion-MNIST IDX files")
	flag.BoolVar(&c.PrintSteps, "print-steps", false, `print every update: "step N lr X loss Y"`)
	flag.Parse()
	if _, err := Train(c, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

// mlp builds the CLI's 784-512-256-10 network into a new graph; training adds the loss and
// SGD with momentum.
type mlp struct {
	g            *chutney.Graph
	m            *chutney.Model
	x, labels    chutney.Node
	logits, loss chutney.Node
}

func buildMLP(ctx *chutney.Context, batch int64, c Config, training bool) (*mlp, error) {
	g, err := ctx.NewGraph()
	if err != nil {
		return nil, err
	}
	m, err := g.NewModel(chutney.Float32, c.Seed)
	if err != nil {
		g.Close()
		return nil, err
	}
	n := &mlp{g: g, m: m}
	if err := m.SetTraining(training); err != nil {
		n.Close()
		return nil, err
	}
	n.x = g.Input("x", chutney.Float32, batch, 784)
	n.logits = m.Sequential(n.x, chutney.LinearLayer(512), chutney.ReLULayer(),
		chutney.LinearLayer(256), chutney.ReLULayer(), chutney.LinearLayer(10))
	if training {
		n.labels = g.Input("labels", chutney.Int32, batch)
		n.loss = g.CrossEntropy(n.logits, n.labels)
		m.Minimize(n.loss, chutney.Optimizer{Kind: chutney.OptimSGD, LR: c.LR, Momentum: c.Momentum})
	}
	if err := g.Err(); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *mlp) Close() {
	n.m.Close()
	n.g.Close()
}

// Train trains and returns every update's loss; it writes the CLI's per-step lines (with
// PrintSteps) and one line per epoch to out.
func Train(c Config, out io.Writer) ([]float32, error) {
	if c.EvalBatch == 0 {
		c.EvalBatch = c.Batch
	}
	trainSet, err := chutney.OpenFashionMNIST(c.DataDir, "train")
	if err != nil {
		return nil, err
	}
	defer trainSet.Close()
	testSet, err := chutney.OpenFashionMNIST(c.DataDir, "test")
	if err != nil {
		return nil, err
	}
	defer testSet.Close()
	loaderOpts := chutney.LoaderOptions{BatchSize: int(c.Batch), Shuffle: true, DropLast: true, Flat: true,
		Seed: c.Seed, Mean: pixelMean, Std: pixelStd, NumWorkers: 1}
	trainLoader, err := chutney.NewLoader(trainSet, loaderOpts)
	if err != nil {
		return nil, err
	}
	defer trainLoader.Close()
	testLoader, err := chutney.NewLoader(testSet, chutney.LoaderOptions{BatchSize: int(c.EvalBatch), Flat: true,
		Seed: c.Seed, Mean: pixelMean, Std: pixelStd, NumWorkers: 1})
	if err != nil {
		return nil, err
	}
	defer testLoader.Close()

	batches, err := trainLoader.NumBatches()
	if err != nil {
		return nil, err
	}
	if c.Limit > 0 && c.Limit/c.Batch < batches {
		batches = c.Limit / c.Batch
	}
	ctx, err := chutney.NewContext(nil)
	if err != nil {
		return nil, err
	}
	defer ctx.Close()
	train, err := buildMLP(ctx, c.Batch, c, true)
	if err != nil {
		return nil, err
	}
	defer train.Close()
	eval, err := buildMLP(ctx, c.EvalBatch, c, false)
	if err != nil {
		return nil, err
	}
	defer eval.Close()
	trainPlan, err := train.g.Compile(train.loss)
	if err != nil {
		return nil, err
	}
	defer trainPlan.Close()
	evalPlan, err := eval.g.Compile(eval.logits)
	if err != nil {
		return nil, err
	}
	defer evalPlan.Close()

	x, y, err := trainLoader.NewBatch()
	if err != nil {
		return nil, err
	}
	defer x.Close()
	defer y.Close()
	lossT, err := trainPlan.NewOutput(0)
	if err != nil {
		return nil, err
	}
	defer lossT.Close()
	feeds := []chutney.Feed{{Node: train.x, Value: x}, {Node: train.labels, Value: y}}
	schedule := chutney.LRSchedule{Kind: chutney.LRCosine, BaseLR: c.LR, TotalSteps: c.Epochs * batches}
	if schedule.TotalSteps < 1 {
		schedule.TotalSteps = 1
	}

	var losses []float32
	loss := make([]float32, 1)
	step := int64(0)
	for epoch := int64(1); epoch <= c.Epochs; epoch++ {
		if err := trainLoader.Reset(epoch - 1); err != nil {
			return nil, err
		}
		sum := 0.0
		for b := int64(0); b < batches; b++ {
			n, err := trainLoader.Next(x, y)
			if err != nil {
				return nil, err
			}
			if int64(n) != c.Batch {
				return nil, fmt.Errorf("the loader returned a short batch (%d)", n)
			}
			step++
			lr, err := schedule.At(step)
			if err != nil {
				return nil, err
			}
			if err := train.m.SetStep(step); err != nil {
				return nil, err
			}
			if err := train.m.SetLR(lr); err != nil {
				return nil, err
			}
			if err := train.m.Run(trainPlan, feeds, lossT); err != nil {
				return nil, err
			}
			if err := chutney.Read(lossT, loss); err != nil {
				return nil, err
			}
			if c.PrintSteps {
				fmt.Fprintf(out, "step %d lr %.17g loss %.9g\n", step, lr, loss[0]) // the CLI's printf formats
			}
			losses = append(losses, loss[0])
			sum += float64(loss[0])
		}
		if _, err := chutney.CopyState(train.m, trainPlan, eval.m, evalPlan); err != nil {
			return nil, err
		}
		acc, err := evaluate(evalPlan, eval.x, testLoader)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "epoch %d/%d: train loss %.4f, test accuracy %.4f\n", epoch, c.Epochs, sum/float64(batches), acc)
	}
	return losses, nil
}

// evaluate is the accuracy of the inference plan over every test sample (padded rows of the
// last batch ignored).
func evaluate(plan *chutney.Plan, x chutney.Node, loader *chutney.Loader) (float64, error) {
	images, labels, err := loader.NewBatch()
	if err != nil {
		return 0, err
	}
	defer images.Close()
	defer labels.Close()
	logits, err := plan.NewOutput(0)
	if err != nil {
		return 0, err
	}
	defer logits.Close()
	shape := logits.Shape()
	rows, classes := int(shape[0]), int(shape[1])
	out := make([]float32, rows*classes)
	lab := make([]int32, rows)
	if err := loader.Reset(0); err != nil {
		return 0, err
	}
	correct, total := 0, 0
	for {
		n, err := loader.Next(images, labels)
		if err != nil {
			return 0, err
		}
		if n == 0 {
			break
		}
		if err := plan.Run([]chutney.Feed{{Node: x, Value: images}}, logits); err != nil {
			return 0, err
		}
		if err := chutney.Read(logits, out); err != nil {
			return 0, err
		}
		if err := chutney.Read(labels, lab); err != nil {
			return 0, err
		}
		for r := 0; r < n; r++ {
			row := out[r*classes : (r+1)*classes]
			best := 0
			for k, v := range row {
				if v > row[best] {
					best = k
				}
			}
			if int32(best) == lab[r] {
				correct++
			}
		}
		total += n
	}
	return float64(correct) / float64(total), nil
}
