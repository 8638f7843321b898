/**
 * Collects the calls made in one turn of the event loop and runs them as one batch. Slots of many
 * jobs fire in the same timer phase; one statement or one write for all of them keeps the cost per
 * slot flat as the number of jobs grows. A batch of one behaves like a direct call.
 *
 * A batch that fails is run again one input at a time, so one bad input (a value the database
 * rejects) fails only its own call, never the calls that happened to share its turn.
 */
export class MicroBatcher<I, O> {
  private pending: Array<Call<I, O>> = [];

  constructor(
    /** Runs a batch; returns one output per input, in order. */
    private readonly run: (inputs: I[]) => Promise<O[]>,
    private readonly maxBatch: number,
  ) {}

  add(input: I): Promise<O> {
    return new Promise<O>((resolve, reject) => {
      this.pending.push({ input, resolve, reject });
      if (this.pending.length === 1) setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    const all = this.pending;
    this.pending = [];
    for (let start = 0; start < all.length; start += this.maxBatch) this.runBatch(all.slice(start, start + this.maxBatch));
  }

  private runBatch(batch: Array<Call<I, O>>): void {
    this.run(batch.map((call) => call.input)).then(
      (outputs) => batch.forEach((call, i) => call.resolve(outputs[i]!)),
      (error: unknown) => {
        if (batch.length === 1) batch[0]!.reject(error);
        else for (const call of batch) this.runBatch([call]);
      },
    );
  }
}

interface Call<I, O> {
  input: I;
  resolve(output: O): void;
  reject(error: unknown): void;
}
