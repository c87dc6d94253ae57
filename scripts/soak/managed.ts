// A soak process role (`w1`, `o1`, the checker) across its incarnations: started, killed and
// restarted by the harness, its stdout lines awaited, its life recorded as an Incarnation.
import type { ChildProcess } from 'node:child_process';
import type { Incarnation } from './records.ts';

/** Starts one incarnation with these arguments (stdio: pipe, pipe, pipe). */
export type Spawner = (args: string[]) => ChildProcess;

/** One worker role (`w1`, `o1`, the checker) across its incarnations. */
export class Managed {
  inc = 0;
  child!: ChildProcess;
  life!: Incarnation;
  exited!: Promise<void>;
  private lines: string[] = [];
  private waiters: Array<() => void> = [];
  /** Set while the harness itself ends this incarnation (a kill or the final stop). */
  private ending = false;
  final = false;

  constructor(
    readonly name: string,
    private readonly argv: (inc: number) => string[],
    private readonly spawner: Spawner,
    private readonly log: NodeJS.WritableStream,
    private readonly lives: Incarnation[],
  ) {}

  start() {
    this.lines = [];
    this.ending = false;
    const child = this.spawner(this.argv(this.inc));
    this.child = child;
    const life: Incarnation = {
      name: this.name,
      inc: this.inc,
      pid: child.pid!,
      started_at: Date.now(),
      ended_at: null,
      killed: false,
      exit: null,
    };
    this.life = life;
    this.lives.push(life);
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        this.lines.push(buf.slice(0, nl));
        buf = buf.slice(nl + 1);
        for (const w of this.waiters.splice(0)) w();
      }
    });
    child.stderr!.pipe(this.log, { end: false });
    child.stdin!.on('error', () => {}); // a killed child's pipe
    this.exited = new Promise((resolve) =>
      child.once('exit', (code, signal) => {
        life.ended_at = Date.now();
        if (!this.ending) {
          // Nobody asked it to go: a crash. Recorded (the run fails) and restarted.
          life.exit = `${code ?? signal}`;
          if (!this.final) {
            this.inc++;
            this.start();
          }
        }
        resolve();
      }),
    );
  }

  async kill() {
    this.ending = true;
    this.child.kill('SIGKILL');
    await this.exited;
    this.life.killed = true;
    this.inc++;
    this.start();
  }

  /** Its machine is about to be killed whole: the exit that follows is the harness's doing. */
  expectKill() {
    this.ending = true;
  }

  /** After the machine kill: recorded as killed; `start` runs the next incarnation. */
  async killedWithMachine() {
    await this.exited;
    this.life.killed = true;
    this.inc++;
  }

  send(cmd: string) {
    this.child.stdin!.write(`${cmd}\n`);
  }

  line(want: string, ms: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.name}#${this.inc}: no "${want}" within ${ms} ms`)), ms);
      const check = () => {
        if (this.lines.includes(want)) {
          clearTimeout(t);
          resolve();
        } else this.waiters.push(check);
      };
      check();
    });
  }

  /** The harness's own end of this incarnation: `cmd`, then wait for it to exit by itself. */
  async stop(cmd: string, ms: number) {
    this.final = true;
    this.ending = true;
    this.send(cmd);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), ms)));
    const how = await Promise.race([this.exited.then(() => 'exited' as const), timeout]);
    clearTimeout(timer);
    if (how === 'timeout') {
      this.life.exit = `did not stop within ${ms} ms`;
      this.child.kill('SIGKILL');
      await this.exited;
    }
  }
}
