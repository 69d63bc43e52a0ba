"""Articles and site chrome for the near-duplicate benchmark on text without spaces (``ragtrim-bench dedup scripts``).

Two splits, written for this project:
* ``dev``: Kyoto (Japanese), Beijing (Chinese) and Kyoto (English, a translation of the
  Japanese) articles with their two sites' headers and footers, plus a third article
  per language written for this benchmark. The shingle length for Han/Kana lines was chosen on this split.
* ``heldout``: written after the rule was coded and before any number was measured on it, never used to choose
  anything: three Japanese and three Chinese articles, each with a sibling on a close topic that reuses its phrasing
  (the hard negative), new site chrome, and English translations of the Japanese articles and chrome.

Each language of a split has articles in pairs ``(article, sibling)`` and two sites ``(header, footer)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LanguageSet:
    language: str
    articles: tuple[tuple[str, str], ...]
    """(article, sibling on a close topic) pairs; the siblings are different articles and must never be merged."""
    sites: tuple[tuple[str, str], tuple[str, str]]
    """Two sites' (header, footer); header ends and footer starts with a line break."""


# -- dev ----------------------------------------------------------------------------------------------------------
_JA_KYOTO_AUTUMN = """京都の紅葉は例年十一月中旬から十二月上旬にかけて見頃を迎える。
特に東福寺の通天橋から眺める渓谷の紅葉は有名で、毎年多くの観光客が訪れる。
永観堂では夜間のライトアップが行われ、池に映る紅葉が幻想的な景色をつくる。
嵐山では渡月橋周辺の山々が赤や黄色に染まり、保津川の舟下りから紅葉を楽しむこともできる。
混雑を避けるには、平日の早朝に訪れるのがよい。
市バスは大変混み合うため、地下鉄や京阪電車を利用すると移動がスムーズである。
今年は夏の猛暑の影響で色づきがやや遅れる見込みだと、気象の専門家は話している。"""
_JA_KYOTO_SPRING = """京都の桜は例年三月下旬から四月上旬にかけて見頃を迎える。
特に哲学の道の桜並木は有名で、疏水沿いに約二キロにわたって桜が咲き誇る。
円山公園では夜桜のライトアップが行われ、しだれ桜が幻想的な景色をつくる。
嵐山では渡月橋周辺の山々が淡い桜色に染まり、保津川の舟下りから花見を楽しむこともできる。
混雑を避けるには、平日の早朝に訪れるのがよい。
市バスは大変混み合うため、地下鉄や嵐電を利用すると移動がスムーズである。
今年は冬の寒さの影響で開花がやや早まる見込みだと、気象の専門家は話している。"""
_JA_NARA_DEER = """奈良公園には約千二百頭のシカが暮らしており、国の天然記念物に指定されている。
シカせんべいは公園内の売店で一束二百円で売られ、観光客が手渡しで与える姿が見られる。
ただし、せんべい以外の食べ物を与えるとシカの健康を損なうため、禁止されている。
秋の繁殖期には雄ジカが気が荒くなるので、角には十分注意してほしい。
毎年十月には、けがを防ぐために雄ジカの角を切る伝統行事「鹿の角きり」が行われる。
公園の管理事務所は、ごみを必ず持ち帰るよう呼びかけている。"""
_JA_NARA_SIB = """宮島には約五百頭のシカが暮らしており、古くから神の使いとして大切にされてきた。
島ではシカへの餌やりが条例で禁止されており、観光客が手渡しで与える姿は見られなくなった。
せんべいを含むあらゆる食べ物を与えるとシカの健康を損なうため、注意が必要だ。
秋の繁殖期には雄ジカが気が荒くなるので、角には十分注意してほしい。
島の南側の山には野生のシカも多く、夜間は道路に出てくることがある。
島の観光協会は、ごみを必ず持ち帰るよう呼びかけている。"""

_JA_SITES = (
    ("ホーム | ニュース | 旅行 | グルメ | ログイン\n京都観光ナビ 最新記事一覧\n",
     "\nこの記事をシェアする Twitter Facebook LINE\n© 2024 京都観光ナビ All rights reserved. 利用規約 プライバシーポリシー"),
    ("トップページ > 国内旅行 > 関西 > 京都府\n旅のしおりマガジン 会員登録はこちら\n",
     "\n関連記事 おすすめの宿ランキング 人気のお土産10選\n運営会社 お問い合わせ 広告掲載について Copyright 旅のしおり"),
)

_ZH_BEIJING_AUTUMN = """北京的秋天是一年中最美的季节。
香山的红叶每年十月中旬开始变红，吸引大量游客前来观赏。
颐和园的昆明湖在秋日阳光下波光粼粼，十七孔桥是拍照的好地方。
为了避开人群，建议工作日早上出发。
公交车非常拥挤，乘坐地铁会更加方便。"""
_ZH_BEIJING_SPRING = """北京的春天是一年中最短的季节。
玉渊潭的樱花每年三月下旬开始盛开，吸引大量游客前来观赏。
颐和园的西堤在春日阳光下桃红柳绿，十七孔桥是拍照的好地方。
为了避开人群，建议工作日早上出发。
公交车非常拥挤，乘坐地铁会更加方便。"""
_ZH_XIAN_MUSEUM = """西安的陕西历史博物馆收藏了一百七十多万件文物，被誉为古都明珠。
馆内的唐代壁画和青铜器最受欢迎，每天都有大批游客排队参观。
博物馆实行免费预约制度，每天限流八千人，节假日的门票往往提前一周就被约满。
建议游客在官方网站或小程序上提前预约，并携带身份证入馆。
馆内禁止使用闪光灯拍照，大件行李需要寄存。
参观结束后，可以步行前往附近的大雁塔和大唐不夜城。"""
_ZH_XIAN_SIB = """洛阳的洛阳博物馆收藏了四十多万件文物，是了解河洛文化的重要窗口。
馆内的唐三彩和青铜器最受欢迎，每天都有不少游客专程前来参观。
博物馆实行免费预约制度，每天限流六千人，节假日的门票往往提前三天就被约满。
建议游客在官方网站或小程序上提前预约，并携带身份证入馆。
馆内禁止使用闪光灯拍照，大件行李需要寄存。
参观结束后，可以乘车前往附近的龙门石窟和白马寺。"""

_ZH_SITES = (
    ("首页 | 新闻 | 旅游 | 美食 | 登录\n北京旅游网 最新文章\n", "\n分享到 微博 微信\n© 2024 北京旅游网 版权所有 隐私政策"),
    ("首页 > 国内游 > 华北 > 北京\n旅行杂志 注册会员\n", "\n相关文章 酒店排行 人气特产十选\n关于我们 联系我们 广告合作"),
)

_EN_KYOTO_AUTUMN = """Autumn leaves in Kyoto usually peak from mid-November to early December.
The gorge seen from the Tsutenkyo bridge at Tofukuji is especially famous, and many tourists visit every year.
Eikando holds evening illuminations, and the leaves reflected in the pond create a dreamlike scene.
In Arashiyama the hills around the Togetsukyo bridge turn red and yellow, and you can enjoy the leaves from a boat.
To avoid the crowds, it is best to visit early on a weekday morning.
City buses are very crowded, so the subway or the Keihan line makes getting around smoother.
Experts say the colours may be slightly late this year because of the summer heat."""
_EN_KYOTO_SPRING = """Cherry blossoms in Kyoto usually peak from late March to early April.
The row of cherry trees along the Philosopher's Path is especially famous, blooming for two kilometres by the canal.
Maruyama Park holds evening illuminations, and the weeping cherry creates a dreamlike scene.
In Arashiyama the hills around the Togetsukyo bridge turn pale pink, and you can enjoy the blossoms from a boat.
To avoid the crowds, it is best to visit early on a weekday morning.
City buses are very crowded, so the subway or the Randen line makes getting around smoother.
Experts say the blossoms may open slightly early this year because of the winter cold."""
_EN_NARA_DEER = """About 1,200 deer live in Nara Park, and they are designated a national natural monument.
Deer crackers are sold at stalls in the park for 200 yen a bundle, and visitors can be seen feeding them by hand.
Feeding them anything other than the crackers is prohibited, however, because it harms the deer's health.
In the autumn rutting season the stags become aggressive, so be careful of their antlers.
Every October the traditional antler-cutting ceremony is held to prevent injuries.
The park office asks visitors to take their rubbish home with them."""
_EN_NARA_SIB = """About 500 deer live on Miyajima, and they have long been cherished as messengers of the gods.
Feeding the deer is banned on the island by ordinance, and visitors are no longer seen feeding them by hand.
Feeding them any food, crackers included, harms the deer's health, so care is needed.
In the autumn rutting season the stags become aggressive, so be careful of their antlers.
Many wild deer live in the hills on the south of the island, and at night they sometimes come out onto the roads.
The island's tourist association asks visitors to take their rubbish home with them."""

_EN_SITES = (
    ("Home | News | Travel | Food | Log in\nKyoto Travel Navi Latest articles\n",
     "\nShare this article Twitter Facebook LINE\n(c) 2024 Kyoto Travel Navi All rights reserved. Terms Privacy policy"),
    ("Top page > Domestic travel > Kansai > Kyoto\nTravel Notes Magazine Sign up here\n",
     "\nRelated articles Best inns ranking Top 10 souvenirs\nCompany Contact Advertise with us Copyright Travel Notes"),
)

# -- held-out -----------------------------------------------------------------------------------------------------
_JA_TRAM = """宇都宮市と芳賀町を結ぶ次世代型路面電車が、八月二十六日に開業した。
新設の路面電車としては国内で七十五年ぶりとなり、開業初日から多くの市民が列をつくった。
全長約十五キロの路線に十九の停留場があり、宇都宮駅東口から工業団地までを約四十四分で結ぶ。
車両は三両編成の低床式で、車いすやベビーカーでも段差なく乗り降りできる。
運賃は距離に応じて百五十円から四百円で、交通系ICカードが使える。
市は渋滞の緩和と沿線の再開発につなげたい考えで、将来は駅の西側への延伸も検討している。
一方で、開業直後は自動車との接触事故も起きており、運行会社は安全運転の徹底を呼びかけている。"""
_JA_TRAM_SIB = """富山市の路面電車が、富山駅の高架下で南北につながってから五年がたった。
駅の北側と南側を乗り換えなしで行き来できるようになり、利用者は接続前より約二割増えた。
市内を一周する環状線には十三の停留場があり、中心市街地を約二十分で回る。
車両は二両編成の低床式で、車いすやベビーカーでも段差なく乗り降りできる。
運賃は一律二百十円で、交通系ICカードが使える。
市は公共交通を軸にしたまちづくりを進めており、沿線の人口は緩やかに増えている。
一方で、冬の積雪時には遅れが出ることもあり、運行会社は除雪体制の強化を進めている。"""
_JA_EARNINGS = """大手家電メーカーの東邦電機は十日、今年四月から九月までの中間決算を発表した。
売上高は前年同期比八％増の一兆二千億円、営業利益は十五％増の九百億円で、いずれも過去最高となった。
円安で海外向けの空調機器の販売が伸びたほか、データセンター向けの電源装置も好調だった。
一方、国内のテレビ事業は価格競争が激しく、三期連続の赤字となった。
同社は通期の業績予想を上方修正し、年間配当も一株あたり五円増やすとした。
記者会見で社長は「成長分野への投資を加速し、事業の入れ替えを進める」と述べた。"""
_JA_EARNINGS_SIB = """大手精密機器メーカーの北星光学は十二日、今年四月から九月までの中間決算を発表した。
売上高は前年同期比三％減の四千八百億円、営業利益は二十％減の三百億円で、二期ぶりの減収減益となった。
スマートフォン向けのカメラ部品の需要が落ち込んだほか、中国での半導体製造装置の販売も振るわなかった。
一方、医療用の内視鏡事業は好調で、過去最高の売上を記録した。
同社は通期の業績予想を下方修正したが、年間配当は据え置くとした。
記者会見で社長は「成長分野への投資を続け、事業の入れ替えを進める」と述べた。"""
_JA_FESTIVAL = """北海道函館市で、秋の味覚を集めた「はこだてグルメフェスタ」が週末の二日間開かれた。
会場の赤レンガ倉庫前には道南の飲食店など六十店が並び、イカやホタテを使った料理が人気を集めた。
名物のイカめしは昼前に売り切れる店が相次ぎ、長い行列ができた。
今年は初めて、地元の高校生が考案した新しいスイーツの販売コーナーも設けられた。
主催者によると、二日間の来場者は約四万五千人で、昨年を一割ほど上回った。
実行委員長は「来年は会場を広げ、海外からの観光客にも楽しんでもらいたい」と話した。"""
_JA_FESTIVAL_SIB = """北海道小樽市で、冬の味覚を集めた「おたる冬の味覚市」が週末の二日間開かれた。
会場の運河沿いには後志地方の飲食店など四十店が並び、カニや甘エビを使った料理が人気を集めた。
名物の海鮮丼は昼前に売り切れる店が相次ぎ、長い行列ができた。
今年は初めて、地元の大学生が考案した新しい土産物の販売コーナーも設けられた。
主催者によると、二日間の来場者は約二万八千人で、昨年をわずかに下回った。
実行委員長は「来年は開催時期を見直し、海外からの観光客にも楽しんでもらいたい」と話した。"""

_JA_HELDOUT_SITES = (
    ("ニュース速報 | 経済 | 地域 | スポーツ | 天気\n日本地域新聞デジタル 会員ログイン\n",
     "\n記事の無断転載を禁じます。\nお問い合わせ | 会社案内 | 個人情報の取り扱い © 日本地域新聞社"),
    ("まとめニュース > 国内 > 最新記事\nこの記事は約3分で読めます\n",
     "\nこの記事が気に入ったらフォローしよう\n人気記事ランキング 1位 2位 3位\n運営者情報 免責事項 Copyright まとめニュース"),
)

_ZH_RAIL = """连接福州和厦门的福厦高铁于九月二十八日正式开通运营。
这是我国第一条跨海高铁，全长约二百七十七公里，设计时速三百五十公里。
线路途经莆田和泉州，沿途共设八座车站，其中三座跨越海湾。
开通后，福州至厦门最快只需五十五分钟，比过去缩短了一半以上。
首日共开行列车六十余对，车票在开售后几分钟内就被抢购一空。
当地政府表示，高铁将进一步带动沿线城市的旅游和产业发展。"""
_ZH_RAIL_SIB = """连接杭州和温州的杭温高铁于今年年底开始联调联试。
线路全长约二百六十公里，设计时速三百五十公里，途经绍兴和金华。
沿途共设九座车站，其中两座为新建的地下车站。
开通后，杭州至温州最快只需一小时，比过去缩短了一个多小时。
铁路部门表示，正式开通的日期将根据试运行的情况确定。
当地政府表示，高铁将进一步带动沿线城市的旅游和产业发展。"""
_ZH_PHONE = """国内手机厂商星辰科技昨天在深圳发布了新一代旗舰手机。
新机搭载自主研发的芯片，续航时间比上一代提高了百分之二十。
相机方面，主摄像头采用一英寸大底传感器，夜景拍摄效果明显提升。
标准版售价为四千九百九十九元，将于下周五起正式发售。
公司负责人在发布会上表示，今年的出货目标是一千万台。
分析人士认为，高端手机市场的竞争将更加激烈。"""
_ZH_PHONE_SIB = """国内手机厂商远航通信昨天在北京发布了新一代折叠屏手机。
新机采用新的铰链设计，机身厚度比上一代减少了百分之十五。
相机方面，主摄像头采用五千万像素传感器，长焦拍摄效果明显提升。
标准版售价为七千九百九十九元，将于本月底起正式发售。
公司负责人在发布会上表示，今年的出货目标是三百万台。
分析人士认为，折叠屏手机市场的竞争将更加激烈。"""
_ZH_STORM = """受台风“海燕”影响，广东省气象台今天上午发布了台风红色预警。
预计台风将于明天傍晚在湛江到茂名一带沿海登陆，登陆时中心附近最大风力可达十四级。
广州、深圳等地的中小学和幼儿园明天全部停课，部分航班和高铁列车已经取消。
气象部门提醒市民尽量减少外出，远离广告牌和临时搭建物。
渔船已全部回港避风，沿海地区共转移群众约十二万人。
应急部门表示，将密切关注台风动向，及时发布最新信息。"""
_ZH_STORM_SIB = """受强冷空气影响，黑龙江省气象台今天上午发布了暴雪橙色预警。
预计今晚到明天，哈尔滨到牡丹江一带将出现大到暴雪，局部积雪深度可达二十厘米。
哈尔滨等地的中小学和幼儿园明天全部停课，部分航班和高速公路已经关闭。
气象部门提醒市民尽量减少外出，注意防寒保暖和交通安全。
供暖部门已提前升温，全省共出动除雪车辆约三千台次。
应急部门表示，将密切关注天气变化，及时发布最新信息。"""

_ZH_HELDOUT_SITES = (
    ("首页 | 国内 | 国际 | 财经 | 科技 | 体育\n华夏新闻网 客户端下载\n",
     "\n责任编辑：王明\n本网站所刊登的信息未经授权不得转载 联系我们 网站地图 © 华夏新闻网"),
    ("当前位置：首页 > 资讯 > 正文\n阅读模式 字号 大 中 小\n",
     "\n相关阅读 热门推荐 猜你喜欢\n关于本站 | 广告服务 | 投诉建议 | 京ICP备12345678号"),
)

_EN_TRAM = """A next-generation tram linking Utsunomiya and the town of Haga opened on August 26.
It is the first newly built tram line in the country in 75 years, and crowds of residents queued on the first day.
The line is about 15 km long with 19 stops, and runs from the east exit of Utsunomiya Station to an industrial park in about 44 minutes.
The low-floor trains have three cars, so wheelchairs and pushchairs can board without a step.
Fares range from 150 to 400 yen depending on distance, and transport IC cards are accepted.
The city hopes it will ease congestion and spur redevelopment along the route, and is considering extending it west of the station.
There have already been collisions with cars since the opening, and the operator is urging drivers to take care."""
_EN_TRAM_SIB = """Five years have passed since Toyama's trams were joined north and south beneath the elevated Toyama Station.
Passengers can now travel between the north and south sides of the station without changing, and ridership is up about 20 percent.
The loop line around the city has 13 stops and circles the city centre in about 20 minutes.
The low-floor trains have two cars, so wheelchairs and pushchairs can board without a step.
The flat fare is 210 yen, and transport IC cards are accepted.
The city is building its development around public transport, and the population along the lines is slowly growing.
Trains are sometimes delayed by snow in winter, and the operator is strengthening its snow clearing."""
_EN_EARNINGS = """Major electronics maker Toho Denki announced its interim results for April to September on the 10th.
Sales rose 8 percent from a year earlier to 1.2 trillion yen and operating profit rose 15 percent to 90 billion yen, both record highs.
The weak yen lifted sales of air conditioners abroad, and power supplies for data centres also sold well.
The domestic television business, however, lost money for the third period in a row amid fierce price competition.
The company raised its full-year forecast and will increase its annual dividend by 5 yen a share.
At a news conference the president said the company would speed up investment in growth areas and reshape its businesses."""
_EN_EARNINGS_SIB = """Major precision equipment maker Hokusei Optical announced its interim results for April to September on the 12th.
Sales fell 3 percent from a year earlier to 480 billion yen and operating profit fell 20 percent to 30 billion yen, its first decline in two periods.
Demand for smartphone camera parts slumped, and sales of chipmaking equipment in China were weak.
The medical endoscope business, however, did well and recorded its highest sales ever.
The company cut its full-year forecast but will keep its annual dividend unchanged.
At a news conference the president said the company would keep investing in growth areas and reshape its businesses."""
_EN_FESTIVAL = """The Hakodate Gourmet Festa, a celebration of autumn food, was held over two days at the weekend in Hakodate, Hokkaido.
Sixty restaurants from southern Hokkaido lined up in front of the red brick warehouses, and dishes made with squid and scallops were popular.
Stall after stall sold out of the famous stuffed squid before noon, and long queues formed.
This year, for the first time, there was also a corner selling new sweets devised by local high school students.
According to the organisers, about 45,000 people came over the two days, some 10 percent more than last year.
The head of the organising committee said they hoped to enlarge the venue next year and welcome visitors from abroad too."""
_EN_FESTIVAL_SIB = """The Otaru Winter Food Market, a celebration of winter food, was held over two days at the weekend in Otaru, Hokkaido.
Forty restaurants from the Shiribeshi area lined up along the canal, and dishes made with crab and sweet shrimp were popular.
Stall after stall sold out of the famous seafood bowls before noon, and long queues formed.
This year, for the first time, there was also a corner selling new souvenirs devised by local university students.
According to the organisers, about 28,000 people came over the two days, slightly fewer than last year.
The head of the organising committee said they hoped to review the dates next year and welcome visitors from abroad too."""

_EN_HELDOUT_SITES = (
    ("Breaking news | Business | Regions | Sports | Weather\nJapan Regional News Digital Member login\n",
     "\nReproduction of articles without permission is prohibited.\nContact | About us | Privacy (c) Japan Regional News"),
    ("Roundup News > Japan > Latest\nThis article takes about 3 minutes to read\n",
     "\nFollow us if you liked this article\nPopular articles 1st 2nd 3rd\nAbout the operator Disclaimer Copyright Roundup News"),
)

SPLITS: dict[str, tuple[LanguageSet, ...]] = {
    "dev": (
        LanguageSet("ja", ((_JA_KYOTO_AUTUMN, _JA_KYOTO_SPRING), (_JA_NARA_DEER, _JA_NARA_SIB)), _JA_SITES),
        LanguageSet("zh", ((_ZH_BEIJING_AUTUMN, _ZH_BEIJING_SPRING), (_ZH_XIAN_MUSEUM, _ZH_XIAN_SIB)), _ZH_SITES),
        LanguageSet("en", ((_EN_KYOTO_AUTUMN, _EN_KYOTO_SPRING), (_EN_NARA_DEER, _EN_NARA_SIB)), _EN_SITES),
    ),
    "heldout": (
        LanguageSet("ja", ((_JA_TRAM, _JA_TRAM_SIB), (_JA_EARNINGS, _JA_EARNINGS_SIB),
                           (_JA_FESTIVAL, _JA_FESTIVAL_SIB)), _JA_HELDOUT_SITES),
        LanguageSet("zh", ((_ZH_RAIL, _ZH_RAIL_SIB), (_ZH_PHONE, _ZH_PHONE_SIB), (_ZH_STORM, _ZH_STORM_SIB)),
                    _ZH_HELDOUT_SITES),
        LanguageSet("en", ((_EN_TRAM, _EN_TRAM_SIB), (_EN_EARNINGS, _EN_EARNINGS_SIB),
                           (_EN_FESTIVAL, _EN_FESTIVAL_SIB)), _EN_HELDOUT_SITES),
    ),
}
