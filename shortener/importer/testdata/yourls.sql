-- MySQL dump 10.13  Distrib 8.0.36, for Linux (x86_64)
--
-- Table structure for table `yourls_url`
--
DROP TABLE IF EXISTS `yourls_url`;
CREATE TABLE `yourls_url` (
  `keyword` varchar(100) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `url` text CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
  `title` text,
  `timestamp` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP,
  `ip` varchar(41) NOT NULL,
  `clicks` int unsigned NOT NULL,
  PRIMARY KEY (`keyword`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
LOCK TABLES `yourls_url` WRITE;
INSERT INTO `yourls_url` VALUES ('ozh','https://ozh.org/','Ozh RICHARD','2009-06-14 16:39:19','127.0.0.1',42),('yourls','https://yourls.org/?a=1&b=\'2\'','YOURLS: Your Own URL Shortener','2009-06-14 16:39:20','127.0.0.1',7),
('with-nl','https://example.com/x','two\nlines, (and) commas','2021-03-04 05:06:07','::1',0);
UNLOCK TABLES;
INSERT INTO `yourls_log` VALUES (1,'2021-03-04 05:06:07','ozh','direct','Mozilla','127.0.0.1','FR');
INSERT INTO `yourls_url` (`keyword`, `url`, `title`, `timestamp`, `ip`, `clicks`) VALUES ('b@d','https://x.example/','','2021-03-04 05:06:07','::1',1);
