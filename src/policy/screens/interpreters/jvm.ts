/**
 * The interpreter table's JVM languages (src/policy/screens/interpreters.ts): Kotlin, Groovy and groovysh, Scala,
 * jshell, jrunscript.
 */
import { ALWAYS, type Interpreter, NO_POSITIONAL_SCRIPT, NO_SCRIPT } from './spec.ts';

const KOTLIN_VALUED = [
  'cp',
  'classpath',
  'd',
  'jdk-home',
  'jvm-target',
  'module-name',
  'script-templates',
  'api-version',
  'kotlin-home',
  'language-version',
  'P',
  'opt-in',
  'jdk-release',
  'jvm-default',
  'howtorun',
];
const KOTLIN_FLAGS =
  /^-(?:[XJD].*|include-runtime|java-parameters|no-jdk|no-reflect|no-stdlib|script|Werror|Wextra|progressive|nowarn|verbose|version|help|h)$/;

export const JVM: Interpreter[] = [
  // kotlinc without a source file is a REPL (checked: options alone, `-d out`, `-cp .` all read stdin); the
  // `kotlin` runner's newer versions start it too. -X/-J/-D options carry their value attached.
  {
    match: /^(?:kotlin|kotlinc|kotlinc-jvm)$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e', 'expression'],
    valuedWord: KOTLIN_VALUED,
    flagWord: KOTLIN_FLAGS,
    standalone: /^-(?:X|h)$/,
    stopAtScript: false,
    stdinCode: { when: 'no-script', strict: true },
  },
  { match: /^groovy$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdn', stopAtScript: true, standalone: /^-[vh]$/, stdinCode: NO_SCRIPT },
  { match: /^groovysh$/, inlineShort: 'e', valuedShort: 'cDl', flagShort: 'hvdqT', stopAtScript: false, standalone: /^-[vh]$/, stdinCode: ALWAYS },
  // scala (2's runner and scala-cli) without a script or with `repl` is a REPL; `-i FILE` preloads a file into it.
  {
    match: /^scala$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    inlineSubcommands: ['repl'],
    stopAtScript: false,
    valuedWord: [
      'cp',
      'classpath',
      'd',
      'encoding',
      'sourcepath',
      'bootclasspath',
      'extdirs',
      'javabootclasspath',
      'javaextdirs',
      'release',
      'i',
      'howtorun',
      'S',
      'M',
      'J',
      'O',
      'r',
      'o',
    ],
    valuedLong: [
      'dep',
      'dependency',
      'main-class',
      'scala-version',
      'jvm',
      'java-opt',
      'java-prop',
      'repository',
      'java-home',
      'server',
      'workspace',
      'scalac-option',
      'compilation-output',
      'output',
    ],
    stdinCode: NO_SCRIPT,
  },
  // jshell runs its load files, then reads snippets from stdin (checked: `jshell s.jsh` runs stdin code).
  { match: /^jshell$/, inlineShort: '', valuedShort: '', flagShort: '', stopAtScript: false, stdinCode: ALWAYS },
  // jrunscript's positional arguments are the script's arguments: only `-f FILE` gives it a program.
  {
    match: /^jrunscript$/,
    inlineShort: '',
    valuedShort: '',
    flagShort: '',
    wordOptions: true,
    inlineWord: ['e'],
    valuedWord: ['cp', 'classpath', 'l', 'encoding', 'f'],
    flagWord: /^-(?:[JD].*|q|\?|help)$/,
    standalone: /^-(?:q|\?|help)$/,
    stopAtScript: false,
    stdinCode: { when: 'no-script', script: NO_POSITIONAL_SCRIPT, scriptOptions: ['-f'], strict: true },
  },
];
