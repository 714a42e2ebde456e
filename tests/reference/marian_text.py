"""The text of the marian fixture (make_marian_fixture.py): the lines its two SentencePiece
models are trained on and the test sentences. bench/marian_speed.py times the source lines too."""

TEXT_SRC = """the cat sits on the mat
a dog runs in the park
the weather is nice today
I would like a cup of tea
where is the train station
my brother reads a book every evening
we are going to the market tomorrow
she sings a song for the children
open the window please
the house at the end of the street is old
can you help me with this problem
the river flows slowly through the town
he forgot his keys at home
they play football on sunday
this translation model is very small
good morning and welcome
the computer does not start
please close the door behind you
how much does this bread cost
the museum opens at nine o'clock""".split("\n")

TEXT_TGT = """die katze sitzt auf der matte
ein hund läuft im park
das wetter ist heute schön
ich möchte eine tasse tee
wo ist der bahnhof
mein bruder liest jeden abend ein buch
wir gehen morgen auf den markt
sie singt ein lied für die kinder
öffne bitte das fenster
das haus am ende der straße ist alt
kannst du mir bei diesem problem helfen
der fluss fließt langsam durch die stadt
er hat seine schlüssel zu hause vergessen
sie spielen am sonntag fußball
dieses übersetzungsmodell ist sehr klein
guten morgen und willkommen
der computer startet nicht
bitte schließ die tür hinter dir
wie viel kostet dieses brot
das museum öffnet um neun uhr""".split("\n")

# The test sentences: training lines, variations, and text the models cannot cover (€, ß
# on the source side, digits).
SENTENCES = TEXT_SRC[:12] + [
    "the dog sits in the park",
    "I would like the book",
    "where is my cat?",
    "the price is 20 € today",
    "Open The Window",
    "straße and weather",
    "a",
    "we play at nine",
]
