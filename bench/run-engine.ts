// `npx tsx bench/run-engine.ts`: only the engine and runtime figures.
import { engineBench } from './engine.ts';

await engineBench();
