/**
 * The attack suite (test/attack/suite.ts) against a real agent whose jobs run in gvisor with
 * the team's sandbox.reuse on: every attack, plus what a job could leave for the next one.
 */
import { attackSuite } from './suite.ts';

attackSuite('gvisor', { reuse: { jobs: 1000, seconds: 3600 } });
